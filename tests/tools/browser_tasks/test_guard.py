"""The network side of critical points: what a task's page may send, decided per request."""

from __future__ import annotations

import pytest

from tools.browser_tasks.guard import Decision, RequestGuard, field_names, request_signature, site_of

PAGE = "https://shop.example.co.uk/cart"


def decide(guard: RequestGuard, method: str, url: str, **extra) -> Decision:
    return guard.decide(
        method=method,
        url=url,
        post_data=extra.get("post_data"),
        content_type=extra.get("content_type", ""),
        navigation=extra.get("navigation", False),
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


def test_the_owner_signing_in_sends_what_the_sign_in_sends():
    guard = RequestGuard()
    guard.owner_acts()

    assert decide(guard, "POST", "https://accounts.example/login") is Decision.SEND
    guard.rest()
    assert decide(guard, "POST", "https://accounts.example/login") is Decision.REFUSE


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
