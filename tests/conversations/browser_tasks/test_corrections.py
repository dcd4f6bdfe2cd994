"""Correcting a paused browser task through the chat: its restrictions carried over, Start superseding it."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection, transaction

from conversations.browser_tasks import lifecycle, services
from conversations.browser_tasks.propose import CORRECTION_MESSAGE
from conversations.browser_tasks.runner.loop import CONTINUED_NOTE
from conversations.browser_tasks.selectors import browser_tasks_list
from conversations.browser_tasks.services import Reply
from conversations.models import BrowserTask, BrowserTaskProposal, CriticalPoint, Event, Message
from conversations.services import conversation_create, conversation_delete, conversation_teardown
from flarebot.core.errors import Conflict, InvalidInput
from tests.support.browser_tasks import (
    answer,
    new_conversation,
    open_point,
    orm,
    page_sent,
    paused_task,
    run,
    start,
    step,
    task_get,
    task_requests,
)
from tests.support.browser_tasks import propose as propose_async
from tests.support.engine import ask, assistant_parts, tool_parts
from tests.support.fake_providers import Call, Text
from tests.support.threads import in_threads, postgres_lock_awaited
from tools.models import BrowserLease

pytestmark = pytest.mark.django_db(transaction=True)

PAUSED_PAGE = "https://shop.example/"  # where `paused_task` pauses
UNFINISHED = ("running", "paused")


@pytest.fixture
def conversation(owner):
    return conversation_create(name="Shopping").id


def correct(conversation_id, *, restrictions, start_url="https://shop.example/kettles"):
    return services.browser_task_propose(
        conversation_id=conversation_id,
        turn_id=uuid.uuid4(),
        tool_call_id=f"call-{uuid.uuid4()}",
        goal="Buy the red kettle instead.",
        start_url=start_url,
        restrictions=restrictions,
    )


def kinds(conversation_id):
    return list(
        Event.objects.filter(conversation_id=conversation_id).order_by("sequence").values_list("kind", flat=True)
    )


def unfinished(conversation_id):
    return list(BrowserTask.objects.filter(conversation_id=conversation_id, status__in=UNFINISHED))


def test_a_proposal_while_a_task_is_paused_carries_its_restrictions_over_first_and_says_so(conversation):
    paused, _ = paused_task(conversation, restrictions=["At most 30 EUR.", "No express shipping."])

    # The model repeats one restriction, forgets another and adds a new one.
    proposal = correct(conversation, restrictions=["Red, not blue.", "At most 30 EUR."])

    stored = BrowserTaskProposal.objects.get(id=proposal.id)
    assert stored.restrictions == ["At most 30 EUR.", "No express shipping.", "Red, not blue."]
    assert (stored.corrects_id, stored.carried, stored.state) == (paused.id, 2, "proposed")
    proposed = (
        Event.objects.filter(conversation_id=conversation, kind="browser_task.proposed").order_by("sequence").last()
    )
    assert proposed.data == {
        "proposal_id": str(proposal.id),
        "goal": "Buy the red kettle instead.",
        "start_url": "https://shop.example/kettles",
        "restrictions": ["At most 30 EUR.", "No express shipping.", "Red, not blue."],
        "corrects_task_id": str(paused.id),
        "carried_restrictions": ["At most 30 EUR.", "No express shipping."],
    }
    listed = browser_tasks_list(conversation_id=conversation)["proposals"][-1]
    assert (listed["corrects_task_id"], listed["carried_restrictions"]) == (
        str(paused.id),
        ["At most 30 EUR.", "No express shipping."],
    )
    # The model may send none: nothing is dropped.
    again = correct(conversation, restrictions=[])
    assert BrowserTaskProposal.objects.get(id=again.id).restrictions == ["At most 30 EUR.", "No express shipping."]
    # Without an unfinished task, a proposal corrects nothing.
    assert browser_tasks_list(conversation_id=conversation)["proposals"][0]["corrects_task_id"] is None


def test_a_correction_past_the_restriction_limit_is_refused_and_changes_nothing(conversation):
    paused_task(conversation, restrictions=[f"Rule {n}." for n in range(15)])
    waiting = correct(conversation, restrictions=["Red."])
    before = kinds(conversation)

    with pytest.raises(InvalidInput) as refused:
        correct(conversation, restrictions=[f"New rule {n}." for n in range(6)])

    assert refused.value.code == "invalid_proposal"
    assert "15 carried over" in refused.value.message
    assert kinds(conversation) == before
    assert BrowserTaskProposal.objects.get(id=waiting.id).state == "proposed"  # not superseded either
    assert BrowserTaskProposal.objects.filter(conversation_id=conversation).count() == 2


def test_start_on_a_correction_supersedes_the_paused_task_and_continues_on_its_page(conversation):
    paused, point = paused_task(conversation)
    context = uuid.uuid4()
    sealed = lifecycle.storage_seal({"cookies": [{"name": "session", "value": "abc"}], "origins": []})
    BrowserTask.objects.filter(id=paused.id).update(context_lease_id=context, storage_sealed=sealed)
    correction = correct(conversation, restrictions=["Red, not blue."])
    before = len(kinds(conversation))

    task = services.browser_task_start(conversation_id=conversation, proposal_id=correction.id)

    old = BrowserTask.objects.get(id=paused.id)
    assert (old.status, old.outcome_summary) == ("superseded", lifecycle.SUPERSEDED_SUMMARY)
    assert old.finished_at is not None
    assert [s["name"] for s in old.steps] == ["ask_owner"]  # its steps stay on its card
    assert old.storage_sealed is None  # its checkpoint went to the correction
    assert CriticalPoint.objects.get(id=point.id).state == "void"
    new = BrowserTask.objects.get(id=task.id)
    assert (new.status, new.goal, new.restrictions) == (
        "running",
        "Buy the red kettle instead.",
        ["At most 30 EUR.", "Red, not blue."],
    )
    assert (new.current_url, bytes(new.storage_sealed), new.context_lease_id) == (PAUSED_PAGE, sealed, context)
    assert (new.steps, new.authorization) == ([], None)  # nothing approved before carries over
    assert unfinished(conversation) == [new]
    assert kinds(conversation)[before:] == [
        "browser_task.finished",
        "activity.updated",
        "browser_task.started",
        "activity.updated",
        "message.replaced",
        "turn.completed",
    ]
    finished = Event.objects.filter(conversation_id=conversation, kind="browser_task.finished").get().data
    assert finished == {"task_id": str(paused.id), "outcome": "superseded", "summary": lifecycle.SUPERSEDED_SUMMARY}
    [message] = Message.objects.filter(conversation_id=conversation)
    assert message.parts[0]["text"] == f"**Browser task superseded.** {lifecycle.SUPERSEDED_SUMMARY}"
    listed = {t["task_id"]: t for t in browser_tasks_list(conversation_id=conversation)["tasks"]}
    assert listed[str(paused.id)]["status"] == "superseded"
    assert [s["action"] for s in listed[str(paused.id)]["steps"]] == ["ask_owner"]
    with pytest.raises(Conflict) as stale:
        services.critical_point_answer(conversation_id=conversation, reply=Reply(str(point.id), response="Small."))
    assert stale.value.code == "stale_critical_point"


def test_a_conversation_with_a_superseded_task_and_its_correction_is_deleted_whole(conversation):
    paused_task(conversation)
    services.browser_task_start(conversation_id=conversation, proposal_id=correct(conversation, restrictions=[]).id)
    waiting = correct(conversation, restrictions=["Blue after all."])  # corrects the correction
    assert waiting.restrictions == ["At most 30 EUR.", "Blue after all."]

    conversation_delete(conversation_id=conversation)

    assert conversation_teardown(conversation_id=conversation) is True
    assert not BrowserTask.objects.exists()
    assert not BrowserTaskProposal.objects.filter(id=waiting.id).exists()


def test_a_correction_that_goes_to_another_site_starts_on_its_start_url(conversation):
    paused, _ = paused_task(conversation)
    BrowserTask.objects.filter(id=paused.id).update(context_lease_id=uuid.uuid4())
    correction = correct(conversation, restrictions=[], start_url="https://kettles.example/")

    task = services.browser_task_start(conversation_id=conversation, proposal_id=correction.id)

    new = BrowserTask.objects.get(id=task.id)
    assert (new.current_url, new.storage_sealed, new.context_lease_id) == ("", None, None)
    assert BrowserTask.objects.get(id=paused.id).status == "superseded"
    assert new.restrictions == ["At most 30 EUR."]


def test_start_on_a_correction_while_the_task_runs_is_refused_and_changes_nothing(conversation):
    paused, point = paused_task(conversation)
    correction = correct(conversation, restrictions=[])
    services.critical_point_answer(conversation_id=conversation, reply=Reply(str(point.id), response="Small."))
    before = kinds(conversation)

    with pytest.raises(Conflict) as refused:
        services.browser_task_start(conversation_id=conversation, proposal_id=correction.id)

    assert refused.value.code == "task_unfinished"
    assert "once it pauses" in refused.value.message
    assert kinds(conversation) == before
    assert BrowserTaskProposal.objects.get(id=correction.id).state == "proposed"
    assert [t.id for t in unfinished(conversation)] == [paused.id]


def test_a_correction_of_a_task_that_ended_meanwhile_starts_afresh(conversation):
    paused, _ = paused_task(conversation)
    correction = correct(conversation, restrictions=["Red."])
    services.browser_task_cancel(conversation_id=conversation)

    task = services.browser_task_start(conversation_id=conversation, proposal_id=correction.id)

    assert BrowserTask.objects.get(id=paused.id).status == "cancelled"
    new = BrowserTask.objects.get(id=task.id)
    assert (new.current_url, new.restrictions) == ("", ["At most 30 EUR.", "Red."])
    assert unfinished(conversation) == [new]


def test_a_plain_proposal_from_before_the_task_started_cannot_replace_it(conversation):
    paused, _ = paused_task(conversation)
    stray = BrowserTaskProposal.objects.create(
        conversation_id=conversation, turn_id=uuid.uuid4(), tool_call_id="stray", goal="x", start_url=PAUSED_PAGE
    )

    with pytest.raises(Conflict) as refused:
        services.browser_task_start(conversation_id=conversation, proposal_id=stray.id)

    assert refused.value.code == "task_unfinished"
    assert BrowserTask.objects.get(id=paused.id).status == "paused"


@pytest.mark.parametrize(("first", "then"), [("start", "answer"), ("answer", "start"), ("cancel", "start")])
def test_start_racing_an_answer_or_a_cancel_leaves_exactly_one_unfinished_task(conversation, first, then):
    paused, point = paused_task(conversation)
    correction = correct(conversation, restrictions=[])
    writers = {
        "start": lambda: services.browser_task_start(conversation_id=conversation, proposal_id=correction.id),
        "answer": lambda: services.critical_point_answer(
            conversation_id=conversation, reply=Reply(str(point.id), response="Small.")
        ),
        "cancel": lambda: services.browser_task_cancel(conversation_id=conversation),
    }
    done_first = threading.Event()
    second_waiting = threading.Event()

    def leader():
        with transaction.atomic():  # holds its rows until the other writer waits for them
            result = writers[first]()
            done_first.set()
            assert second_waiting.wait(30)
            return result

    def follower():
        assert done_first.wait(30)
        return writers[then]()

    def observer():
        assert done_first.wait(30)
        waited = connection.vendor != "postgresql" or postgres_lock_awaited("transactionid")
        second_waiting.set()
        assert waited, "the second writer never waited for the first one's row lock"

    led, followed, observed = in_threads(leader, follower, observer)

    assert observed is None, observed
    tasks = unfinished(conversation)
    if first == "start":  # the answer came too late: the task it answers was superseded
        assert isinstance(led, BrowserTask), led
        assert isinstance(followed, Conflict), followed
        assert followed.code == "stale_critical_point"
        assert [(t.id, t.status) for t in tasks] == [(led.id, "running")]
        assert BrowserTask.objects.get(id=paused.id).status == "superseded"
    elif first == "answer":  # the task resumed: the correction waits until it pauses again
        assert isinstance(followed, Conflict), followed
        assert followed.code == "task_unfinished"
        assert [(t.id, t.status) for t in tasks] == [(paused.id, "running")]
        assert BrowserTaskProposal.objects.get(id=correction.id).state == "proposed"
    else:  # the task was stopped first: the correction starts afresh, without its page
        assert led == paused.id
        assert isinstance(followed, BrowserTask), followed
        assert [(t.id, t.current_url) for t in tasks] == [(followed.id, "")]
        assert BrowserTask.objects.get(id=paused.id).status == "cancelled"


async def test_the_model_is_told_what_was_carried_over_and_what_start_does(anthropic, fake_providers, cancels):
    conversation_id = (await orm(conversation_create)()).id
    paused, _ = await orm(paused_task)(conversation_id)
    proposal = {"goal": "Buy the red kettle.", "start_url": "https://shop.example/red", "restrictions": ["Red."]}
    fake_providers.script([Call("toolu_fix", "browser_task_propose", proposal)], [Text("Check and press Start.")])

    turn = await ask(conversation_id, "Actually, make it the red one.", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    output = part["output"]
    assert output["ok"] is True
    assert output["corrects_task_id"] == str(paused.id)
    assert output["carried_restrictions"] == ["At most 30 EUR."]
    assert output["restrictions"] == ["At most 30 EUR.", "Red."]
    assert output["message"] == CORRECTION_MESSAGE
    assert "superseded" in CORRECTION_MESSAGE
    assert "continues on its page" in CORRECTION_MESSAGE
    description = next(
        tool["description"]
        for tool in fake_providers.requests[0].body["tools"]
        if tool["name"] == "browser_task_propose"
    )
    assert "carried over by themselves and cannot be dropped" in description


async def test_the_corrected_task_continues_on_the_paused_page_with_its_cookies(
    anthropic, fake_providers, cancels, web
):
    conversation_id = await new_conversation()
    paused_id = await start(
        conversation_id,
        await propose_async(
            conversation_id, goal="Check.", start_url=web.url("/cookie-set"), restrictions=["Spend nothing."]
        ),
    )
    fake_providers.script(step("scroll", direction="down"), step("ask_owner", question="Which page next?"))
    paused = await run(paused_id, cancels)
    assert paused.status == "paused"
    correction = await propose_async(
        conversation_id, goal="Check the echo page.", start_url=web.url("/cookie-echo"), restrictions=[]
    )
    fake_providers.script(
        step("go_to", url=web.url("/cookie-echo")),
        step("finish", outcome="completed", summary="The echo page shows the cookie."),
    )

    task_id = await start(conversation_id, correction)
    task = await run(task_id, cancels)

    assert task.status == "completed"
    old = await task_get(paused_id)
    assert old.status == "superseded"
    assert [s["name"] for s in old.steps] == ["scroll", "ask_owner"]
    assert await orm(lambda: BrowserLease.objects.get(id=paused.context_lease_id).state)() == "closed"
    first, last = task_requests(fake_providers)[-2:]
    seen = page_sent(first)
    assert CONTINUED_NOTE in seen
    assert web.url("/cookie-set") in seen  # it began on the paused task's page, not on its start URL
    brief = first.body["messages"][0]["content"][0]["text"]
    assert "Restrictions (keep every one):\n- Spend nothing." in brief
    assert "cookie: abc" in page_sent(last)  # with the paused task's cookies
    assert await open_point(task_id) is None
    with pytest.raises(Conflict):
        await answer(conversation_id, (await orm(CriticalPoint.objects.get)(task_id=paused_id)).id, response="x")
