"""Browser tasks run in this process: real Chromium, the fixture sites, a scripted task model."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid

import pytest
from django.db import connection

from conversations.browser_tasks import runner, services
from conversations.browser_tasks.lifecycle import browser_task_storage_state
from conversations.models import BrowserTask, CriticalPoint, Message, MessageRole
from conversations.services import conversation_delete, conversation_teardown
from flarebot.core.errors import Conflict, InvalidInput, NotFound
from tests.support.browser_tasks import (
    answer,
    events,
    kinds,
    new_conversation,
    open_point,
    orm,
    page_sent,
    propose,
    results_sent,
    run,
    start,
    step,
    task_get,
    task_requests,
)
from tools.models import BrowserLease


async def lease_state(lease_id):
    return await orm(lambda: BrowserLease.objects.get(id=lease_id).state)()


async def task_actions(task_id):
    return (await task_get(task_id)).actions


async def eventually(check, expected, *, what, timeout=30.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while (value := await check()) != expected:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {value!r}")
        await asyncio.sleep(0.05)


def in_thread(function, **kwargs):
    try:
        return function(**kwargs)
    finally:
        connection.close()


pytestmark = [
    pytest.mark.django_db(transaction=True),
]


async def cart_filled_after_approval(fake_providers, cancels, web, conversation_id, task_id):
    """Click "Add to cart": its POST is held; the owner approves it; the repeated click adds the kettle."""
    fake_providers.script(step("click", element=1))
    task = await run(task_id, cancels)
    assert task.status == "paused"
    held = await open_point(task_id)
    assert held.kind == "confirm"
    assert held.action["requests"] == [
        {
            "method": "POST",
            "host": f"127.0.0.1:{web.port}",
            "path": "/shop/cart/add",
            "fields": [],
            "submission": {
                "form": False,
                "method": "POST",
                "address": web.url("/shop/cart/add"),
                "button": "Add to cart",
                "button_text": None,
                "fields": [],
                "fields_more": 0,
                "body": None,
                "body_cut": False,
            },
        }
    ]
    assert web.cart == []
    assert "/shop/cart/add" not in web.paths()
    await answer(conversation_id, held.id, response="Yes, add it.", approve=True)
    return held


async def test_it_pauses_before_place_order_and_only_an_approval_places_it_once(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    task_id = await start(
        conversation_id,
        await propose(
            conversation_id, goal="Buy one blue kettle.", start_url=web.url("/shop"), restrictions=["At most 30 EUR."]
        ),
    )
    held = await cart_filled_after_approval(fake_providers, cancels, web, conversation_id, task_id)
    fake_providers.script(
        step("click", element=1, critical_point_id=str(held.id)), step("click", element=2), step("click", element=1)
    )

    task = await run(task_id, cancels)

    assert task.status == "paused"
    point = await open_point(task_id)
    assert point.kind == "confirm"
    assert point.action["description"] == f"Clicking 'Place order' on 127.0.0.1:{web.port}"
    assert web.cart == ["Blue kettle"]
    assert web.orders == []
    assert "/shop/order" not in web.paths()
    requests = task_requests(fake_providers)
    assert '[1] button "Add to cart"' in page_sent(requests[0])
    assert '[1] button "Place order"' in page_sent(requests[-1])

    fake_providers.script(
        step("click", element=1, critical_point_id=str(point.id)),
        step("finish", outcome="completed", summary="The page confirmed order A-1001."),
    )
    await answer(conversation_id, point.id, response="Yes, place it.", approve=True)
    task = await run(task_id, cancels)

    assert task.status == "completed"
    assert web.orders == [["Blue kettle"]]
    last_results = results_sent(task_requests(fake_providers)[-1])
    assert last_results[-2]["owner_reply"] == "Yes, place it."
    assert last_results[-2]["critical_point_id"] == str(point.id)
    assert last_results[-2]["performed"] is False
    assert last_results[-2]["approved"] is True
    happened = await kinds(conversation_id)
    assert happened.count("critical_point.opened") == 2
    assert happened.count("critical_point.resolved") == 2
    assert happened.count("browser_task.finished") == 1
    [message] = await orm(
        lambda: list(Message.objects.filter(conversation_id=conversation_id, role=MessageRole.ASSISTANT))
    )()
    assert message.parts == [{"type": "text", "text": "**Browser task completed.** The page confirmed order A-1001."}]


async def task_at(web, conversation_id, path, *, goal):
    return await start(conversation_id, await propose(conversation_id, goal=goal, start_url=web.url(path)))


async def shop_task(web, conversation_id):
    proposal = await propose(conversation_id, goal="Buy a kettle.", start_url=web.url("/shop"))
    return await start(conversation_id, proposal)


async def paused_before_place_order(fake_providers, cancels, web, conversation_id):
    task_id = await shop_task(web, conversation_id)
    held = await cart_filled_after_approval(fake_providers, cancels, web, conversation_id, task_id)
    fake_providers.script(
        step("click", element=1, critical_point_id=str(held.id)), step("click", element=2), step("click", element=1)
    )
    task = await run(task_id, cancels)
    assert task.status == "paused"
    return task_id, await open_point(task_id)


async def test_a_stale_or_unknown_id_is_refused_and_authorises_nothing(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id, point = await paused_before_place_order(fake_providers, cancels, web, conversation_id)
    fake_providers.script(
        # The model tries its luck with an id it made up, then with the answered one twice.
        step("click", element=1, critical_point_id="00000000-0000-4000-8000-000000000000"),
    )
    await answer(conversation_id, point.id, response="Not yet: first tell me the total.")

    task = await run(task_id, cancels)

    assert task.status == "paused"
    fresh = await open_point(task_id)
    assert fresh.id != point.id
    assert fresh.kind == "confirm"
    assert web.orders == []
    with pytest.raises(Conflict) as stale:
        await answer(conversation_id, point.id, response="Yes")
    assert stale.value.code == "stale_critical_point"
    with pytest.raises(NotFound) as unknown:
        await answer(conversation_id, uuid.uuid4(), response="Yes")
    assert unknown.value.code == "unknown_critical_point"
    with pytest.raises(NotFound):
        await answer(conversation_id, "cp-1", response="Yes")
    other = await new_conversation()
    with pytest.raises(NotFound):
        await answer(other, fresh.id, response="Yes")
    assert (await open_point(task_id)).id == fresh.id
    assert (await task_get(task_id)).authorization is None
    assert web.orders == []


async def test_after_the_kept_context_expired_the_checkpoint_is_restored_and_the_held_action_asked_again(
    anthropic, fake_providers, cancels, web, settings
):
    settings.CONFIG = dataclasses.replace(settings.CONFIG, browser_task_keep=1.0)
    conversation_id = await new_conversation()
    task_id, point = await paused_before_place_order(fake_providers, cancels, web, conversation_id)
    paused = await task_get(task_id)
    await eventually(lambda: lease_state(paused.context_lease_id), "closed", what="the kept context to close")
    fake_providers.script(step("click", element=1, critical_point_id=str(point.id)))
    await answer(conversation_id, point.id, response="Yes, place it.", approve=True)

    task = await run(task_id, cancels)

    assert task.status == "paused"
    again = await open_point(task_id)
    assert again.id != point.id
    assert again.kind == "confirm"
    assert again.action == point.action
    assert task.context_lease_id != paused.context_lease_id
    assert web.orders == []
    restored = page_sent(task_requests(fake_providers)[-1])
    assert "restored from the task's checkpoint" in restored
    assert '[1] button "Place order"' in restored  # the same page, by its URL

    fake_providers.script(
        step("click", element=1, critical_point_id=str(again.id)),
        step("finish", outcome="completed", summary="Order A-1001 confirmed."),
    )
    await answer(conversation_id, again.id, response="Yes, really.", approve=True)
    task = await run(task_id, cancels)

    assert task.status == "completed"
    assert web.orders == [["Blue kettle"]]
    # The steps performed before the pause were never performed again.
    assert web.paths().count("/shop/cart/add") == 1


async def test_cookies_survive_a_restore_and_are_sealed_at_rest_then_erased(
    anthropic, fake_providers, cancels, web, settings
):
    settings.CONFIG = dataclasses.replace(settings.CONFIG, browser_task_keep=1.0)
    conversation_id = await new_conversation()
    task_id = await start(
        conversation_id, await propose(conversation_id, goal="Check.", start_url=web.url("/cookie-set"))
    )
    fake_providers.script(step("ask_owner", question="Which page next?"))
    await run(task_id, cancels)
    paused = await task_get(task_id)
    sealed = bytes(paused.storage_sealed)
    assert b"abc" not in sealed
    assert b"session" not in sealed
    state = await orm(browser_task_storage_state)(task_id=task_id)
    assert [(c["name"], c["value"]) for c in state["cookies"]] == [("session", "abc")]
    await eventually(lambda: lease_state(paused.context_lease_id), "closed", what="the kept context to close")
    point = await open_point(task_id)
    fake_providers.script(
        step("go_to", url=web.url("/cookie-echo")),
        step("finish", outcome="completed", summary="Done."),
    )
    await answer(conversation_id, point.id, response="The echo page.")

    task = await run(task_id, cancels)

    assert task.status == "completed"
    assert "cookie: abc" in page_sent(task_requests(fake_providers)[-1])
    assert task.storage_sealed is None


async def test_email_consent_no_sends_nothing_and_yes_sends_once(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await task_at(web, conversation_id, "/contact", goal="Ask.")
    fake_providers.script(
        step("type", element=1, text="owner@example.org"),
        step("type", element=2, text="Is the kettle in stock?"),
        step("request_email_consent", question="May I send this message to the shop?", element=3),
    )
    await run(task_id, cancels)
    point = await open_point(task_id)
    assert point.kind == "email_consent"
    assert point.action["description"] == f"Clicking 'Send message' on 127.0.0.1:{web.port}"
    with pytest.raises(InvalidInput) as wrong:
        await answer(conversation_id, point.id, response="yes")
    assert wrong.value.code == "wrong_reply"
    fake_providers.script(step("click", element=3, critical_point_id=str(point.id)))
    await answer(conversation_id, point.id, consent=False)

    task = await run(task_id, cancels)

    assert web.emails == []
    assert results_sent(task_requests(fake_providers)[-1])[-1]["consent"] is False
    held = await open_point(task_id)
    assert (task.status, held.kind) == ("paused", "confirm")
    assert held.action["description"] == f"Clicking 'Send message' on 127.0.0.1:{web.port}"

    fake_providers.script(
        step("request_email_consent", question="May I send it now?", element=3),
    )
    await answer(conversation_id, held.id, response="Ask me about consent properly.")
    await run(task_id, cancels)
    consent = await open_point(task_id)
    fake_providers.script(
        step("click", element=3, critical_point_id=str(consent.id)),
        step("finish", outcome="completed", summary="The page said the message was sent."),
    )
    await answer(conversation_id, consent.id, consent=True)
    task = await run(task_id, cancels)

    assert task.status == "completed"
    assert web.emails == [{"email": "owner@example.org", "message": "Is the kettle in stock?"}]


async def test_a_consent_not_bound_to_a_control_allows_no_click(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await task_at(web, conversation_id, "/contact", goal="Ask.")
    fake_providers.script(
        step("type", element=1, text="owner@example.org"),
        step("type", element=2, text="Is the kettle in stock?"),
        step("request_email_consent", question="May I send a message to the shop?"),
    )
    await run(task_id, cancels)
    consent = await open_point(task_id)
    fake_providers.script(step("click", element=3, critical_point_id=str(consent.id)))
    await answer(conversation_id, consent.id, consent=True)

    task = await run(task_id, cancels)

    assert task.status == "paused"
    assert (await open_point(task_id)).kind == "confirm"  # the sending click is asked for, exactly
    assert web.emails == []
    assert "/contact/send" not in web.paths()


async def test_a_sign_in_accepts_only_continue_and_a_question_no_consent(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await start(
        conversation_id, await propose(conversation_id, goal="Sign in.", start_url=web.url("/signin"))
    )
    fake_providers.script(step("request_sign_in", reason="The account page needs you to sign in."))
    await run(task_id, cancels)
    point = await open_point(task_id)
    assert point.kind == "sign_in"

    for refused in ("Continue", "continue ", "my password is hunter2"):
        with pytest.raises(InvalidInput) as error:
            await answer(conversation_id, point.id, response=refused)
        assert error.value.code == "sign_in_continue_only"
    with pytest.raises(InvalidInput):
        await answer(conversation_id, point.id, consent=True)
    stored = await orm(CriticalPoint.objects.get)(id=point.id)
    assert (stored.state, stored.response) == ("open", "")
    fake_providers.script(step("finish", outcome="failed", summary="Not signed in."))
    await answer(conversation_id, point.id, response="continue")
    task = await run(task_id, cancels)

    assert task.status == "failed"
    assert results_sent(task_requests(fake_providers)[-1])[-1]["owner_reply"] == "continue"


async def test_typing_into_a_password_field_is_held_and_the_card_never_shows_typed_text(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    task_id = await start(
        conversation_id, await propose(conversation_id, goal="Sign in.", start_url=web.url("/signin"))
    )
    fake_providers.script(step("type", element=1, text="alice"), step("type", element=2, text="guessed-secret-42"))

    await run(task_id, cancels)

    point = await open_point(task_id)
    assert point.kind == "confirm"
    assert point.action["description"] == f"Typing into 'Password' on 127.0.0.1:{web.port}"
    shown = json.dumps([event.data for event in await events(conversation_id)])
    assert "guessed-secret-42" not in shown
    assert "alice" not in shown
    assert "Typing into 'User name'" in shown


async def test_cancel_ends_a_paused_task_closes_its_context_and_says_so(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id, point = await paused_before_place_order(fake_providers, cancels, web, conversation_id)
    paused = await task_get(task_id)

    assert await orm(services.browser_task_cancel)(conversation_id=conversation_id) == task_id

    task = await task_get(task_id)
    assert (task.status, task.outcome_summary) == ("cancelled", "The owner cancelled the browser task.")
    await eventually(lambda: lease_state(paused.context_lease_id), "closed", what="the kept context to close")
    finished = [e.data for e in await events(conversation_id) if e.kind == "browser_task.finished"]
    assert finished == [{"task_id": str(task_id), "outcome": "cancelled", "summary": task.outcome_summary}]
    with pytest.raises(Conflict):
        await answer(conversation_id, point.id, response="Yes")
    assert await orm(services.browser_task_cancel)(conversation_id=conversation_id) is None
    assert web.orders == []


async def test_cancel_stops_a_running_task_between_actions(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await shop_task(web, conversation_id)
    fake_providers.script(step("wait", seconds=10), step("click", element=1))
    running = asyncio.ensure_future(run(task_id, cancels))
    await eventually(lambda: task_actions(task_id), 1, what="the wait to begin")

    await orm(services.browser_task_cancel)(conversation_id=conversation_id)
    task = await running

    assert task.status == "cancelled"
    assert web.cart == []


async def test_the_network_policy_holds_for_every_navigation(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await shop_task(web, conversation_id)
    fake_providers.script(
        step("go_to", url=web.other_url("/secret")),
        step("go_to", url=web.url("/redirect-other-port")),
        step("finish", outcome="failed", summary="Blocked."),
    )

    await run(task_id, cancels)

    results = results_sent(task_requests(fake_providers)[-1])
    assert [r["ok"] for r in results] == [False, False]
    assert "network policy" in results[0]["message"]
    assert web.paths(web.other_port) == []


async def test_deleting_the_conversation_cancels_the_task_and_closes_its_kept_context(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    task_id, _ = await paused_before_place_order(fake_providers, cancels, web, conversation_id)
    paused = await task_get(task_id)
    await orm(conversation_delete)(conversation_id=conversation_id)

    gone = await asyncio.get_running_loop().run_in_executor(
        None, lambda: in_thread(conversation_teardown, conversation_id=conversation_id)
    )

    assert gone is True
    assert await lease_state(paused.context_lease_id) == "closed"
    assert not await orm(BrowserTask.objects.filter(id=task_id).exists)()
    assert not await orm(CriticalPoint.objects.filter(task_id=task_id).exists)()


async def test_a_model_that_never_acts_fails_the_task(anthropic, fake_providers, cancels, web):
    conversation_id = await new_conversation()
    task_id = await shop_task(web, conversation_id)

    task = await run(task_id, cancels)  # the loopback model only ever says hello

    assert (task.status, task.outcome_summary) == ("failed", "The task's model did not choose an action.")
    assert [e.data["outcome"] for e in await events(conversation_id) if e.kind == "browser_task.finished"] == ["failed"]


async def test_each_step_sends_the_brief_the_steps_so_far_and_the_current_page_with_exactly_ten_tools(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    proposal = await propose(
        conversation_id, goal="Buy a kettle.", start_url=web.url("/shop"), restrictions=["At most 30 EUR."]
    )
    task_id = await start(conversation_id, proposal)
    fake_providers.script(step("scroll", direction="down"), step("finish", outcome="failed", summary="Gave up."))

    await run(task_id, cancels)

    first, second = task_requests(fake_providers)
    assert [tool["name"] for tool in first.body["tools"]] == [
        "go_to",
        "click",
        "type",
        "select",
        "scroll",
        "wait",
        "ask_owner",
        "request_sign_in",
        "request_email_consent",
        "finish",
    ]
    assert "Never ask the owner for passwords" in first.body["system"]
    brief = first.body["messages"][0]["content"][0]["text"]
    assert "Buy a kettle." in brief
    assert "- At most 30 EUR." in brief
    assert page_sent(first).startswith("The current page:\n\nTitle: Fixture shop\nURL: " + web.url("/shop"))
    assert "Blue kettle - 25.00 EUR. In stock." in page_sent(first)
    assert results_sent(second) == [{"ok": True}]
    assert second.body["messages"][1]["content"][0]["input"] == {"direction": "down"}


async def test_a_task_stops_at_its_action_limit(anthropic, fake_providers, cancels, web, monkeypatch):
    monkeypatch.setattr(runner.loop, "MAX_ACTIONS", 2)
    conversation_id = await new_conversation()
    task_id = await shop_task(web, conversation_id)
    fake_providers.script(*[step("scroll", direction="down") for _ in range(3)])

    task = await run(task_id, cancels)

    assert (task.status, task.actions) == ("failed", 2)
    assert task.outcome_summary == "The task was stopped after 2 actions."
    assert len(task_requests(fake_providers)) == 2
