"""The network side of critical points: what a task's page may send, decided per request."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tools.browser_tasks.guard import (
    BODY_KEPT,
    OWNER_WINDOW,
    WEBSOCKET,
    Decision,
    RequestGuard,
    field_names,
    request_signature,
    site_of,
)

PAGE = "https://shop.example.co.uk/cart"


def decide(guard: RequestGuard, method: str, url: str, **extra) -> Decision:
    return guard.decide(
        method=method,
        url=url,
        post_data=extra.get("post_data"),
        content_type=extra.get("content_type", ""),
        navigation=extra.get("navigation", False),
        resource_type=extra.get("resource_type", ""),
        redirected=extra.get("redirected", False),
        echo=extra.get("echo", False),
        again=extra.get("again", False),
    )


def test_plain_reads_are_sent_in_every_mode():
    guard = RequestGuard()
    assert decide(guard, "GET", "https://tracker.example/pixel.png") is Decision.SEND
    guard.act(page_url=PAGE)
    assert decide(guard, "HEAD", "https://cdn.example/app.js") is Decision.SEND


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_a_state_changing_request_to_the_own_site_is_held_while_the_task_acts(method):
    guard = RequestGuard()
    guard.act(page_url=PAGE)

    assert decide(guard, method, "https://api.shop.example.co.uk/orders") is Decision.HOLD

    effects = guard.rest()
    assert [(sent.method, sent.host, sent.path) for sent in effects.held] == [
        (method, "api.shop.example.co.uk", "/orders")
    ]


def test_a_state_changing_request_to_another_site_is_refused_not_held():
    guard = RequestGuard()
    guard.act(page_url=PAGE)

    assert decide(guard, "POST", "https://pay.example/charge") is Decision.REFUSE

    effects = guard.rest()
    assert effects.held == []
    assert [sent.described() for sent in effects.refused] == ["POST pay.example/charge"]


def test_between_actions_nothing_state_changing_leaves_and_the_model_is_told():
    guard = RequestGuard()

    assert decide(guard, "POST", "https://shop.example.co.uk/buy") is Decision.REFUSE
    assert [sent.described() for sent in guard.outside_taken()] == ["POST shop.example.co.uk/buy"]
    assert guard.outside_taken() == []


def test_a_get_form_submission_is_state_changing():
    guard = RequestGuard()
    guard.act(page_url=PAGE)
    guard.form_navigation("https://shop.example.co.uk/buy?item=3&qty=1")

    held = decide(guard, "GET", "https://shop.example.co.uk/buy?item=3&qty=1", navigation=True)

    assert held is Decision.HOLD
    [sent] = guard.rest().held
    assert (sent.form, sent.fields) == (True, ("item", "qty"))
    assert decide(guard, "GET", "https://shop.example.co.uk/buy?item=3&qty=1", navigation=True) is Decision.SEND


def test_an_approval_lets_exactly_the_held_requests_through_each_as_often_as_held():
    guard = RequestGuard()
    guard.act(page_url=PAGE)
    decide(guard, "POST", "https://shop.example.co.uk/buy", post_data="item=3", content_type=FORM)
    [held] = guard.rest().held

    guard.act(page_url=PAGE, allowed=[request_signature(held.as_dict())])

    assert decide(guard, "POST", "https://shop.example.co.uk/buy", post_data="item=4", content_type=FORM) is (
        Decision.SEND
    )
    assert decide(guard, "POST", "https://shop.example.co.uk/buy", post_data="item=5", content_type=FORM) is (
        Decision.HOLD
    )
    assert decide(guard, "POST", "https://shop.example.co.uk/email", post_data="to=x", content_type=FORM) is (
        Decision.HOLD
    )
    assert decide(guard, "POST", "https://pay.example/charge") is Decision.REFUSE


FORM = "application/x-www-form-urlencoded"


def test_an_action_approved_by_its_name_may_send_to_its_own_site_only():
    guard = RequestGuard()
    guard.act(page_url=PAGE, allow_site=True)

    assert decide(guard, "POST", "https://shop.example.co.uk/order") is Decision.SEND
    assert decide(guard, "POST", "https://pay.example/charge") is Decision.REFUSE


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_sign_in_sends_to_its_own_site_only_just_after_the_owners_input():
    clock = Clock()
    guard = RequestGuard(clock=clock)
    guard.owner_acts(page_url="https://shop.example.co.uk/signin")

    assert decide(guard, "POST", "https://shop.example.co.uk/order") is Decision.REFUSE  # the owner did nothing
    guard.owner_input()
    clock.now += OWNER_WINDOW
    assert decide(guard, "POST", "https://accounts.shop.example.co.uk/login") is Decision.SEND
    assert decide(guard, "POST", "https://pay.example/charge") is Decision.REFUSE
    clock.now += 0.01
    assert decide(guard, "POST", "https://shop.example.co.uk/order") is Decision.REFUSE
    assert [sent.described() for sent in guard.outside_taken()] == [
        "POST shop.example.co.uk/order",
        "POST pay.example/charge",
    ]
    guard.rest()
    guard.owner_input()
    assert decide(guard, "POST", "https://shop.example.co.uk/login") is Decision.REFUSE


@pytest.mark.parametrize(
    ("url", "resource_type", "redirected", "held"),
    [
        ("https://shop.example.co.uk/checkout?step=final", "document", False, True),
        ("https://shop.example.co.uk/api/order", "fetch", False, True),
        ("https://shop.example.co.uk/api/delete?id=7", "xhr", False, True),
        ("https://shop.example.co.uk/purchase/confirm", "eventsource", False, True),
        ("https://shop.example.co.uk/pay?confirm=yes", "image", True, True),  # a redirect's hop
        ("https://shop.example.co.uk/img/buy-now.png", "image", False, False),
        ("https://shop.example.co.uk/js/checkout.js", "script", False, False),
        ("https://shop.example.co.uk/orders", "fetch", False, False),
        ("https://shop.example.co.uk/product/kettle", "document", False, False),
    ],
)
def test_a_get_that_reads_as_a_commitment_is_held_where_it_navigates_or_a_script_sends_it(
    url, resource_type, redirected, held
):
    guard = RequestGuard()
    guard.act(page_url=PAGE)

    decision = decide(guard, "GET", url, resource_type=resource_type, redirected=redirected)

    assert decision is (Decision.HOLD if held else Decision.SEND)
    assert decide(RequestGuard(), "GET", url, resource_type=resource_type, redirected=redirected) is (
        Decision.REFUSE if held else Decision.SEND
    )


def test_the_task_opens_its_start_page_once_whatever_it_reads_as():
    guard = RequestGuard()
    guard.opening("https://Shop.example.co.uk/checkout?step=1#top")

    redirect_hop = decide(guard, "GET", "https://shop.example.co.uk/checkout?step=1", navigation=True, redirected=True)
    opened = decide(
        guard, "GET", "https://shop.example.co.uk/checkout?step=1", navigation=True, resource_type="document"
    )
    again = decide(
        guard, "GET", "https://shop.example.co.uk/checkout?step=1", navigation=True, resource_type="document"
    )

    assert (redirect_hop, opened, again) == (Decision.REFUSE, Decision.SEND, Decision.REFUSE)


def test_a_websocket_is_held_like_a_post_and_its_messages_go_only_while_an_action_runs():
    guard = RequestGuard()
    socket = "wss://live.shop.example.co.uk/prices?item=3"

    assert decide(guard, WEBSOCKET, socket) is Decision.REFUSE
    assert [sent.described() for sent in guard.outside_taken()] == [
        "WEBSOCKET live.shop.example.co.uk/prices (fields: item)"
    ]
    guard.act(page_url=PAGE)
    assert decide(guard, WEBSOCKET, socket) is Decision.HOLD
    assert decide(guard, WEBSOCKET, "wss://ticker.example/feed") is Decision.REFUSE
    [held] = guard.rest().held
    assert held.described() == "WEBSOCKET live.shop.example.co.uk/prices (fields: item)"

    guard.act(page_url=PAGE, allowed=[held.signature()])
    assert decide(guard, WEBSOCKET, socket) is Decision.SEND
    assert guard.socket_sends(socket)
    guard.rest()
    assert not guard.socket_sends(socket)
    assert [sent.described() for sent in guard.outside_taken()] == ["WEBSOCKET live.shop.example.co.uk/prices"]


def test_an_approval_spent_by_the_first_layer_is_not_spent_again_by_the_second():
    guard = RequestGuard()
    guard.act(page_url=PAGE)
    decide(guard, "POST", "https://shop.example.co.uk/buy")
    [held] = guard.rest().held
    guard.act(page_url=PAGE, allowed=[held.signature()])

    first = decide(guard, "POST", "https://shop.example.co.uk/buy", echo=True)
    second = decide(guard, "POST", "https://shop.example.co.uk/buy", again=True)
    another = decide(guard, "POST", "https://shop.example.co.uk/buy", again=True)

    assert (first, second, another) == (Decision.SEND, Decision.SEND, Decision.HOLD)


@pytest.mark.parametrize(
    ("post_data", "content_type", "names"),
    [
        ("card=4111111111111111&cvc=123", FORM, ("card", "cvc")),
        ('{"password": "hunter2", "email": "a@b"}', "application/json; charset=utf-8", ("password", "email")),
        (
            '--b\r\nContent-Disposition: form-data; name="avatar"; filename="a.png"\r\n\r\nPNG\r\n--b--',
            "multipart/form-data; boundary=b",
            ("avatar",),
        ),
        ("raw bytes", "application/octet-stream", ()),
    ],
)
def test_only_field_names_are_kept_never_values(post_data, content_type, names):
    kept = field_names(post_data=post_data, content_type=content_type, url="https://a.example/", method="POST")

    assert kept == names
    assert "4111" not in repr(kept)
    assert "hunter2" not in repr(kept)


def test_a_held_request_keeps_its_address_and_body_in_memory_for_its_question_only():
    guard = RequestGuard()
    guard.act(page_url=PAGE)
    long_body = "password=hunter2&note=" + "n" * BODY_KEPT

    decide(guard, "POST", "https://shop.example.co.uk/pay?x=1", post_data=long_body, content_type=FORM)
    decide(guard, "POST", "https://pay.example/charge", post_data="password=hunter2", content_type=FORM)

    effects = guard.rest()
    [held], [refused] = effects.held, effects.refused
    assert (held.url, held.body, held.content_type) == (
        "https://shop.example.co.uk/pay?x=1",
        long_body[:BODY_KEPT],
        FORM,
    )
    assert (refused.body, refused.url) == (None, "")  # a refused request's body is not kept
    assert "hunter2" not in repr(held) + held.described() + json.dumps(held.as_dict())
    assert held == dataclasses.replace(held, body=None, url="")  # what an approval compares is unchanged


@pytest.mark.parametrize(
    ("host", "site"),
    [
        ("shop.example.com", "example.com"),
        ("a.b.example.com", "example.com"),
        ("shop.example.co.uk", "example.co.uk"),
        ("example.com", "example.com"),
        ("127.0.0.1", "127.0.0.1"),
        ("EXAMPLE.com.", "example.com"),
    ],
)
def test_the_site_is_the_registrable_domain(host, site):
    assert site_of(host) == site
