"""Every way a page sends is held: WebSockets, unload beacons, GETs that buy by their address, redirects, workers.

Real Chromium on the loopback trap shop (`tests/support/trap_shop.py`, `SENDING` and
`/traps/senders`), a scripted task model, the owner's answers through the services. What
the shop received is `web.harms`: every request to `/traps/do/...` and every connection and
message of its WebSocket. Before the owner approves it stays empty. A test that proves
nothing arrived first waits for the page (or the guard) to show the attempt was made.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.support.browser_tasks import (
    answer,
    new_conversation,
    open_point,
    propose,
    run,
    start,
    step,
)
from tests.support.engine import eventually
from tests.support.trap_shop import WORKER_KINDS
from tests.support.web_fixtures import THIRD_PARTY_HOST
from tools.browser_tasks.kept import kept_sessions
from tools.browser_tasks.session import owner_input_apply

pytestmark = [pytest.mark.django_db(transaction=True)]

WAIT = 30.0  # the bound of every wait for an event (a loaded machine's worst case is far below it)

# (page, the model's action on element 1, what the owner is asked about, what approval lets through)
SENDING = [
    ("socket", "click", "WEBSOCKET {host}/traps/ws", "WEBSOCKET open"),
    ("beacon", "click", "POST {host}/traps/do/beacon; POST {host}/traps/do/keepalive", None),
    ("details", "click", "GET {host}/traps/do/checkout (fields: step)", "GET checkout"),
    ("scripted", "click", "GET {host}/traps/do/purchase-confirm", "GET purchase-confirm"),
    ("redirect", "click", "GET {host}/traps/do/pay (fields: confirm)", "GET pay"),
    ("image", "click", "GET {host}/traps/do/delete (fields: id)", "GET delete"),
    ("fetch-get", "click", "GET {host}/traps/do/order (fields: item)", "GET order"),
]


async def task_on(web, conversation_id, page):
    return await start(conversation_id, await propose(conversation_id, goal="Look around.", start_url=web.url(page)))


@pytest.mark.parametrize(("page", "action", "asked", "approved"), SENDING, ids=[path[0] for path in SENDING])
async def test_a_sending_path_sends_nothing_until_the_owner_approves(
    anthropic, fake_providers, cancels, web, page, action, asked, approved
):
    host = f"127.0.0.1:{web.port}"
    conversation_id = await new_conversation()
    task_id = await task_on(web, conversation_id, f"/traps/{page}")
    fake_providers.script(step(action, element=1))

    task = await run(task_id, cancels)

    assert web.harms == []
    assert task.status == "paused", (task.outcome_summary, task.steps)
    point = await open_point(task_id)
    assert point.kind == "confirm"
    assert f"tried to send: {asked.format(host=host)}. Nothing was sent." in point.question
    if approved is None:
        return  # the page it acted on is gone: the action cannot be repeated on it

    fake_providers.script(
        step(action, element=1, critical_point_id=str(point.id)),
        step("finish", outcome="completed", summary="Done."),
    )
    await answer(conversation_id, point.id, response="Approved.", approve=True)
    task = await run(task_id, cancels)

    assert task.status == "completed", (task.outcome_summary, task.steps)
    await eventually(lambda: _has(web.harms, approved), timeout=WAIT, what=approved)
    assert web.harms.count(approved) == 1


async def test_no_worker_can_open_a_websocket_and_no_shared_worker_starts(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await task_on(web, conversation_id, "/traps/worker")
    fake_providers.script(step("click", element=1), step("ask_owner", question="Anything else?"))
    await run(task_id, cancels)
    session = kept_sessions().holds(task_id)

    await session.page.wait_for_function("marks.includes('every worker answered')", timeout=WAIT * 1000)

    marks = await session.page.evaluate("marks")
    assert {f"{kind}: no WebSocket" for kind in WORKER_KINDS} <= set(marks), marks
    assert "no shared worker" in marks
    assert web.harms == []


async def test_a_page_that_enforces_trusted_types_still_starts_its_worker_without_websocket(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    task_id = await task_on(web, conversation_id, "/traps/trusted-worker")
    fake_providers.script(step("ask_owner", question="Anything else?"))
    await run(task_id, cancels)
    session = kept_sessions().holds(task_id)

    assert await session.page.evaluate("startTrusted()") == "no WebSocket"
    assert web.harms == []


async def test_a_pop_up_is_emptied_and_its_unload_beacon_never_sent(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await task_on(web, conversation_id, "/traps/popup")
    fake_providers.script(step("click", element=1), step("ask_owner", question="Anything else?"))
    await run(task_id, cancels)
    session = kept_sessions().holds(task_id)
    [popup] = [page for page in session.context.pages if page is not session.page]

    await popup.wait_for_url("about:blank", timeout=WAIT * 1000)
    # Anything the pop-up sent as it was left went out before this request of the page.
    assert await session.page.evaluate("fetch('/traps/plain').then((answer) => answer.status)") == 200

    assert "/traps/popup-page" in web.paths()
    assert web.harms == []


@pytest.fixture
def other_site(settings, dns, web):
    """pay.example, a site of its own that the network policy lets the browser reach (on loopback)."""
    allowed = (*settings.CONFIG.network_allow, (THIRD_PARTY_HOST, web.port))
    settings.CONFIG = dataclasses.replace(settings.CONFIG, network_allow=allowed)
    dns.add(THIRD_PARTY_HOST, "127.0.0.1")


@pytest.mark.parametrize("pause", ["ask_owner", "request_sign_in"])
async def test_while_a_task_waits_for_its_owner_the_page_sends_nothing(
    anthropic, fake_providers, cancels, web, other_site, pause
):
    conversation_id = await new_conversation()
    task_id = await task_on(web, conversation_id, "/traps/senders")
    reason = {"ask_owner": {"question": "Which size?"}, "request_sign_in": {"reason": "Please sign in."}}[pause]
    fake_providers.script(step(pause, **reason))
    await run(task_id, cancels)
    session = kept_sessions().holds(task_id)
    assert session is not None

    marks = await session.page.evaluate("sendAll()")
    tried = await session.page.evaluate("startOrders(8)")
    assert web.harms == []
    await eventually(lambda: _refused(session, "POST", "/traps/do/beacon"), timeout=WAIT, what="the beacon")

    assert tried == 8
    assert "socket closed" in marks
    assert {f"{kind}: no WebSocket" for kind in WORKER_KINDS} <= set(marks), marks
    assert "no shared worker" in marks
    assert {"fetch GET failed", "redirect failed", "fetch POST failed"} <= set(marks)
    assert web.harms == []
    refused = {sent.described() for sent in session.guard.outside_taken()}
    host = f"127.0.0.1:{web.port}"
    assert {
        f"WEBSOCKET {host}/traps/ws",
        f"GET {host}/traps/do/order (fields: item)",
        f"GET {host}/traps/do/pay (fields: confirm)",
        f"POST {host}/traps/do/order",
        f"POST {host}/traps/do/beacon",
    } <= refused


async def test_a_frame_of_another_site_is_held_like_the_page_its_redirect_hops_too(
    anthropic, fake_providers, cancels, web, other_site
):
    conversation_id = await new_conversation()
    task_id = await task_on(web, conversation_id, "/traps/framed")
    fake_providers.script(step("ask_owner", question="Which size?"))
    await run(task_id, cancels)
    session = kept_sessions().holds(task_id)
    [frame] = [frame for frame in session.page.frames if frame.url.endswith("/traps/frame")]

    tried = await frame.evaluate("tryFrame()")

    assert tried == ["redirect failed", "POST failed"]
    assert web.harms == []
    other = f"{THIRD_PARTY_HOST}:{web.port}"
    assert {f"GET {other}/traps/do/pay (fields: confirm)", f"POST {other}/traps/do/frame-post"} <= {
        sent.described() for sent in session.guard.outside_taken()
    }


async def test_a_sign_in_sends_what_the_owners_input_sends_to_its_own_site_only(
    anthropic, fake_providers, cancels, web, other_site
):
    conversation_id = await new_conversation()
    task_id = await task_on(web, conversation_id, "/traps/senders")
    fake_providers.script(step("request_sign_in", reason="Please sign in."))
    await run(task_id, cancels)
    session = kept_sessions().holds(task_id)
    assert await session.page.evaluate("startOrders(8)") == 8
    assert web.harms == []

    box = await session.page.locator("#signin").bounding_box()
    click = {"kind": "click", "x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}
    await owner_input_apply(session, click)

    # The click posts to pay.example first and submits the sign-in once that was decided.
    await eventually(lambda: _has(web.harms, "POST login"), timeout=WAIT, what="the owner's sign-in")
    assert web.harms == ["POST login"]
    refused = [sent.described() for sent in session.guard.outside_taken()]
    assert f"POST {THIRD_PARTY_HOST}:{web.port}/traps/do/third-party" in refused


async def _has(harms, harm):
    return harm in harms


async def _refused(session, method, path):
    return any(sent.method == method and sent.path == path for sent in session.guard.outside_actions)
