"""A task's record: every step (action, element, page) and every answer, kept after the end.

Steps never show typed text; a held submit's question shows what its form would send (masked).
"""

from __future__ import annotations

import json

import pytest

from conversations.browser_tasks.selectors import browser_tasks_list
from conversations.browser_tasks.services import browser_task_cancel
from conversations.models import CriticalPoint
from flarebot.core.times import iso
from tests.support.browser_tasks import answer, events, new_conversation, open_point, orm, propose, run, start, step

pytestmark = [pytest.mark.django_db(transaction=True)]

TYPED = "private words typed-7f3a"


async def listed_task(conversation_id):
    [task] = (await orm(browser_tasks_list)(conversation_id=conversation_id))["tasks"]
    return task


async def test_an_ended_task_keeps_its_steps_and_answers_with_their_times_and_never_typed_text(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    contact = web.url("/contact")
    task_id = await start(conversation_id, await propose(conversation_id, goal="Ask the shop.", start_url=contact))
    fake_providers.script(
        step("type", element=1, text="owner@example.org"),
        step("type", element=2, text=TYPED),
        step("click", element=3),
    )
    await run(task_id, cancels)
    held = await open_point(task_id)
    fake_providers.script(step("ask_owner", question="Shall I try again tomorrow?"))
    await answer(conversation_id, held.id, response="Denied: do not do this.", approve=False)
    await run(task_id, cancels)
    asked = await open_point(task_id)
    fake_providers.script(step("finish", outcome="failed", summary="The owner did not want it sent."))
    await answer(conversation_id, asked.id, response="No, leave it.\nThanks.")

    await run(task_id, cancels)

    task = await listed_task(conversation_id)
    host = f"127.0.0.1:{web.port}"
    assert (task["status"], task["summary"]) == ("failed", "The owner did not want it sent.")
    assert task["steps"] == [
        {
            "number": 1,
            "action": "type",
            "description": f"Typing into 'Your email' on {host}",
            "element": {"number": 1, "role": "textbox", "name": "Your email"},
            "page": contact,
            "outcome": "done",
            "critical_point_id": None,
        },
        {
            "number": 2,
            "action": "type",
            "description": f"Typing into 'Message' on {host}",
            "element": {"number": 2, "role": "textbox", "name": "Message"},
            "page": contact,
            "outcome": "done",
            "critical_point_id": None,
        },
        {
            "number": 3,
            "action": "click",
            "description": f"Clicking 'Send message' on {host}",
            "element": {"number": 3, "role": "button", "name": "Send message"},
            "page": contact,
            "outcome": "answered",
            "critical_point_id": str(held.id),
        },
        {
            "number": 4,
            "action": "ask_owner",
            "description": "Asking you a question",
            "element": None,
            "page": contact,
            "outcome": "answered",
            "critical_point_id": str(asked.id),
        },
    ]
    held, asked = [await orm(CriticalPoint.objects.get)(id=point.id) for point in (held, asked)]
    assert task["questions"] == [
        {
            "critical_point_id": str(held.id),
            "kind": "confirm",
            "question": held.question,
            "action": held.action,
            "state": "resolved",
            "answer": {"response": "Denied: do not do this.", "approve": False, "consent": None},
            "created_at": iso(held.created_at),
            "resolved_at": iso(held.resolved_at),
        },
        {
            "critical_point_id": str(asked.id),
            "kind": "question",
            "question": "Shall I try again tomorrow?",
            "action": None,
            "state": "resolved",
            "answer": {"response": "No, leave it.\nThanks.", "approve": None, "consent": None},
            "created_at": iso(asked.created_at),
            "resolved_at": iso(asked.resolved_at),
        },
    ]
    assert held.resolved_at is not None
    assert asked.resolved_at is not None
    assert task["open_critical_point"] is None
    assert web.emails == []

    # The events rebuild the same record for a card that was open all along.
    logged = await events(conversation_id)
    from_events = {e.data["step"]["number"]: e.data["step"] for e in logged if e.kind == "browser_task.step"}
    assert [from_events[number] for number in sorted(from_events)] == task["steps"]
    resolved = [e.data for e in logged if e.kind == "critical_point.resolved"]
    assert [(r["answer"], r["resolved_at"]) for r in resolved] == [
        (q["answer"], q["resolved_at"]) for q in task["questions"]
    ]
    opened = [e.data["created_at"] for e in logged if e.kind == "critical_point.opened"]
    assert opened == [q["created_at"] for q in task["questions"]]
    # Steps never show typed text; the held click's question shows what the form would send, for the owner.
    shown = json.dumps([e.data for e in logged if e.kind != "critical_point.opened"]) + json.dumps(task["steps"])
    assert TYPED not in shown
    assert "owner@example.org" not in shown
    assert [(f["name"], f["value"]) for f in held.action["submission"]["fields"]] == [
        ("email", "owner@example.org"),
        ("message", TYPED),
    ]


async def test_a_step_in_progress_and_an_unanswered_question_stay_in_the_record_of_a_cancelled_task(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    shop = web.url("/shop")
    task_id = await start(conversation_id, await propose(conversation_id, goal="Buy.", start_url=shop))
    fake_providers.script(step("scroll", direction="down"), step("ask_owner", question="Which colour?"))
    await run(task_id, cancels)
    point = await open_point(task_id)

    await orm(browser_task_cancel)(conversation_id=conversation_id)

    task = await listed_task(conversation_id)
    assert task["status"] == "cancelled"
    assert [(s["action"], s["page"], s["outcome"]) for s in task["steps"]] == [
        ("scroll", shop, "done"),
        ("ask_owner", shop, "asked"),
    ]
    [question] = task["questions"]
    assert (question["critical_point_id"], question["state"], question["answer"]) == (str(point.id), "void", None)
