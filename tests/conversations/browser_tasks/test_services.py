"""Proposals, starts, dismissals, answers and cancels: the rules of the owner's controls, without a browser."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection, transaction

from conversations.browser_tasks import lifecycle, services
from conversations.browser_tasks.services import Reply
from conversations.models import (
    BrowserTask,
    BrowserTaskProposal,
    CriticalPoint,
    Event,
    Message,
    MessageRole,
    Turn,
)
from conversations.services import conversation_create
from flarebot.core.errors import Conflict, InvalidInput, NotFound
from flarebot.core.times import iso
from tests.support.browser_tasks import paused_task
from tests.support.engine import ask, assistant_parts, orm, tool_parts
from tests.support.fake_providers import Call, Text
from tests.support.threads import in_threads, postgres_lock_awaited
from tools.models import BrowserLease, ToolActivity

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]

PROPOSAL = {
    "goal": "Buy one blue kettle.",
    "start_url": "https://shop.example/kettles",
    "restrictions": ["At most 30 EUR."],
}


@pytest.fixture
def conversation(owner):
    return conversation_create(name="Shopping").id


def propose(conversation_id, **changes):
    return services.browser_task_propose(
        conversation_id=conversation_id,
        turn_id=uuid.uuid4(),
        tool_call_id=f"call-{uuid.uuid4()}",
        **{**PROPOSAL, **changes},
    )


def kinds(conversation_id):
    return list(
        Event.objects.filter(conversation_id=conversation_id).order_by("sequence").values_list("kind", flat=True)
    )


def last_event(conversation_id, kind):
    return Event.objects.filter(conversation_id=conversation_id, kind=kind).order_by("-sequence").first().data


async def test_a_proposal_from_a_real_turn_starts_nothing(anthropic, fake_providers, cancels):
    conversation_id = (await orm(conversation_create)()).id
    fake_providers.script(
        [Call("toolu_p", "browser_task_propose", PROPOSAL)], [Text("Check the readback and press Start.")]
    )
    turn = await ask(conversation_id, "Buy me the blue kettle, at most 30 EUR.", cancels)

    assert turn.status == "completed"
    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["status"] == "succeeded"
    assert part["output"]["ok"] is True
    proposal = await orm(BrowserTaskProposal.objects.get)(id=part["output"]["proposal_id"])
    assert (proposal.goal, proposal.start_url, proposal.restrictions) == (
        PROPOSAL["goal"],
        PROPOSAL["start_url"],
        PROPOSAL["restrictions"],
    )
    proposed = await orm(lambda: last_event(conversation_id, "browser_task.proposed"))()
    assert proposed == {
        "proposal_id": str(proposal.id),
        **PROPOSAL,
        "corrects_task_id": None,
        "carried_restrictions": [],
    }
    assert not await orm(BrowserTask.objects.exists)()
    assert not await orm(BrowserLease.objects.exists)()
    assert "browser_task.started" not in await orm(kinds)(conversation_id)


def test_a_proposal_the_policy_refuses_goes_back_to_the_model_and_stores_nothing(conversation):
    for bad in (
        {"start_url": "http://localhost/admin"},
        {"start_url": "ftp://shop.example/"},
        {"goal": "   "},
        {"restrictions": ["x" * 301]},
        {"restrictions": ["ok"] * 21},
    ):
        with pytest.raises(InvalidInput) as refused:
            propose(conversation, **bad)
        assert refused.value.code == "invalid_proposal"
    assert not BrowserTaskProposal.objects.exists()
    assert kinds(conversation) == []


def test_a_replayed_call_finds_its_proposal(conversation):
    turn_id = uuid.uuid4()
    first = services.browser_task_propose(conversation_id=conversation, turn_id=turn_id, tool_call_id="c1", **PROPOSAL)
    again = services.browser_task_propose(conversation_id=conversation, turn_id=turn_id, tool_call_id="c1", **PROPOSAL)

    assert again.id == first.id
    assert kinds(conversation) == ["browser_task.proposed"]


def test_the_start_stores_the_command_exactly_as_proposed_and_announces_it(conversation):
    proposal = propose(conversation, restrictions=["  At most 30 EUR  ", "No express shipping."])

    task = services.browser_task_start(conversation_id=conversation, proposal_id=proposal.id)

    stored = BrowserTask.objects.get(id=task.id)
    assert (stored.goal, stored.start_url, stored.restrictions, stored.status) == (
        PROPOSAL["goal"],
        PROPOSAL["start_url"],
        ["  At most 30 EUR  ", "No express shipping."],
        "running",
    )
    assert last_event(conversation, "browser_task.started") == {
        "task_id": str(task.id),
        "proposal_id": str(proposal.id),
    }
    card = ToolActivity.objects.get(turn_id=task.id)
    assert (card.kind, card.label, card.status, card.tool_call_id) == (
        "browser_task",
        "Browser task",
        "running",
        f"browser_task:{task.id}",
    )


@pytest.mark.parametrize("state", ["started", "dismissed", "superseded"])
def test_a_proposal_that_is_no_longer_open_is_refused(conversation, state):
    proposal = propose(conversation)
    if state == "started":
        task = services.browser_task_start(conversation_id=conversation, proposal_id=proposal.id)
        with transaction.atomic():
            lifecycle.task_end_locked(BrowserTask.objects.select_for_update().get(id=task.id), "failed", "x")
    elif state == "dismissed":
        services.browser_task_dismiss(conversation_id=conversation, proposal_id=proposal.id)
    else:
        propose(conversation)
    before = kinds(conversation)

    with pytest.raises(Conflict) as refused:
        services.browser_task_start(conversation_id=conversation, proposal_id=proposal.id)

    assert refused.value.code == f"proposal_{state}"
    assert kinds(conversation) == before
    assert BrowserTask.objects.filter(proposal_id=proposal.id).count() == (1 if state == "started" else 0)


def test_a_second_unfinished_task_of_the_conversation_is_refused(conversation):
    first = propose(conversation)
    services.browser_task_start(conversation_id=conversation, proposal_id=first.id)
    second = propose(conversation)

    with pytest.raises(Conflict) as refused:
        services.browser_task_start(conversation_id=conversation, proposal_id=second.id)

    assert refused.value.code == "task_unfinished"
    assert BrowserTaskProposal.objects.get(id=second.id).state == "proposed"


def test_a_proposal_of_another_conversation_or_none_at_all_is_not_found(conversation):
    other = conversation_create(name="Other").id
    proposal = propose(other)

    for proposal_id in (proposal.id, uuid.uuid4()):
        with pytest.raises(NotFound):
            services.browser_task_start(conversation_id=conversation, proposal_id=proposal_id)
        with pytest.raises(NotFound):
            services.browser_task_dismiss(conversation_id=conversation, proposal_id=proposal_id)
    assert BrowserTaskProposal.objects.get(id=proposal.id).state == "proposed"


def test_a_dismissal_is_announced_and_final(conversation):
    proposal = propose(conversation)

    services.browser_task_dismiss(conversation_id=conversation, proposal_id=proposal.id)

    assert last_event(conversation, "browser_task.dismissed") == {"proposal_id": str(proposal.id)}
    with pytest.raises(Conflict):
        services.browser_task_dismiss(conversation_id=conversation, proposal_id=proposal.id)


def test_an_answer_is_stored_verbatim_acknowledged_and_given_to_the_paused_step(conversation):
    task, point = paused_task(conversation)
    text = "  The 1.5 l one,\nnot the 2 l one.  "

    services.critical_point_answer(conversation_id=conversation, reply=Reply(str(point.id).upper(), response=text))

    point.refresh_from_db()
    task.refresh_from_db()
    assert (point.state, point.response) == ("resolved", text)
    assert (task.status, task.lease_token) == ("running", "")
    assert task.steps[-1]["result"]["owner_reply"] == text
    assert task.steps[-1]["result"]["critical_point_id"] == str(point.id)
    assert task.authorization is None  # a question allows no action
    assert last_event(conversation, "critical_point.resolved") == {
        "task_id": str(task.id),
        "critical_point_id": str(point.id),
        "answer": {"response": text, "approve": None, "consent": None},
        "resolved_at": iso(point.resolved_at),
    }


@pytest.mark.parametrize(
    ("kind", "reply", "code"),
    [
        ("question", Reply("", consent=True), "wrong_reply"),
        ("sign_in", Reply("", consent=True), "wrong_reply"),
        ("email_consent", Reply("", response="yes"), "wrong_reply"),
        ("sign_in", Reply("", response="Continue"), "sign_in_continue_only"),
        ("sign_in", Reply("", response="continue\n"), "sign_in_continue_only"),
        ("question", Reply("", response=""), "invalid_response"),
        ("question", Reply("", response=" \n "), "invalid_response"),
        ("question", Reply("", response="x" * 4001), "invalid_response"),
        ("question", Reply("", response="bell\x07"), "invalid_response"),
    ],
)
def test_a_reply_of_the_wrong_kind_or_shape_is_refused_and_changes_nothing(conversation, kind, reply, code):
    task, point = paused_task(conversation, kind=kind)
    before = kinds(conversation)

    with pytest.raises(InvalidInput) as refused:
        services.critical_point_answer(
            conversation_id=conversation, reply=Reply(str(point.id), response=reply.response, consent=reply.consent)
        )

    assert refused.value.code == code
    point.refresh_from_db()
    task.refresh_from_db()
    assert (point.state, point.response, point.consent, task.status) == ("open", "", None, "paused")
    assert kinds(conversation) == before


def test_an_email_consent_yes_allows_exactly_the_click_it_was_asked_for_in_the_same_context(conversation):
    task, point = paused_task(conversation, kind="email_consent")
    task.context_lease_id = uuid.uuid4()
    task.save()
    CriticalPoint.objects.filter(id=point.id).update(action={"name": "click", "element": 3}, action_digest="d" * 64)

    services.critical_point_answer(conversation_id=conversation, reply=Reply(str(point.id), consent=True))

    task.refresh_from_db()
    assert task.authorization == {
        "critical_point_id": str(point.id),
        "digest": "d" * 64,
        "lease_id": str(task.context_lease_id),
        "by_name": True,
    }
    assert task.steps[-1]["result"]["consent"] is True


def test_an_email_consent_yes_for_no_named_control_allows_nothing(conversation):
    task, point = paused_task(conversation, kind="email_consent")

    services.critical_point_answer(conversation_id=conversation, reply=Reply(str(point.id), consent=True))

    task.refresh_from_db()
    assert task.authorization is None
    assert "still held for the owner's approval" in task.steps[-1]["result"]["note"]


@pytest.mark.parametrize(
    ("approve", "authorised"),
    [(True, True), (False, False), (None, False)],
)
def test_only_an_explicit_approval_authorises_a_held_action(conversation, approve, authorised):
    task, point = paused_task(conversation, kind="confirm")
    task.context_lease_id = uuid.uuid4()
    task.save()
    CriticalPoint.objects.filter(id=point.id).update(action={"name": "click", "element": 1}, action_digest="e" * 64)
    words = "Yes! Buy it now, go ahead." if approve is None else "No. Do NOT buy this, cancel."

    services.critical_point_answer(
        conversation_id=conversation, reply=Reply(str(point.id), response=words, approve=approve)
    )

    task.refresh_from_db()
    point.refresh_from_db()
    assert point.approved is approve
    assert (task.authorization is not None) is authorised
    result = task.steps[-1]["result"]
    assert result["owner_reply"] == words
    assert result["approved"] is authorised
    assert result["performed"] is False


@pytest.mark.parametrize("kind", ["question", "email_consent", "sign_in"])
def test_approve_is_refused_on_anything_but_a_held_action(conversation, kind):
    _, point = paused_task(conversation, kind=kind)
    reply = Reply(str(point.id), response="continue" if kind == "sign_in" else "Yes", approve=True)
    if kind == "email_consent":
        reply = Reply(str(point.id), consent=True, approve=True)

    with pytest.raises(InvalidInput) as refused:
        services.critical_point_answer(conversation_id=conversation, reply=reply)

    assert refused.value.code == "wrong_reply"
    point.refresh_from_db()
    assert point.state == "open"


def test_cancelling_a_paused_task_ends_it_and_projects_the_outcome_once(conversation):
    task, point = paused_task(conversation)

    assert services.browser_task_cancel(conversation_id=conversation) == task.id

    task.refresh_from_db()
    point.refresh_from_db()
    assert (task.status, point.state) == ("cancelled", "void")
    assert task.projected_at is not None
    assert last_event(conversation, "browser_task.finished") == {
        "task_id": str(task.id),
        "outcome": "cancelled",
        "summary": "The owner cancelled the browser task.",
    }
    assert kinds(conversation)[-4:] == [
        "browser_task.finished",
        "activity.updated",
        "message.replaced",
        "turn.completed",
    ]
    assert lifecycle.browser_task_project(task_id=task.id) is False
    [message] = Message.objects.filter(conversation_id=conversation, role=MessageRole.ASSISTANT)
    assert message.parts == [
        {"type": "text", "text": "**Browser task cancelled.** The owner cancelled the browser task."}
    ]
    assert Turn.objects.get(id=message.turn_id).status == "completed"
    assert services.browser_task_cancel(conversation_id=conversation) is None


def test_a_running_task_is_only_flagged_its_worker_ends_it(conversation):
    proposal = propose(conversation)
    task = services.browser_task_start(conversation_id=conversation, proposal_id=proposal.id)
    lifecycle.browser_task_claim(task_id=task.id)

    services.browser_task_cancel(conversation_id=conversation)

    task.refresh_from_db()
    assert (task.status, task.cancel_requested) == ("running", True)


def test_reconciliation_projects_an_outcome_whose_projection_failed_and_requeues_orphans(conversation, monkeypatch):
    task, _ = paused_task(conversation)
    with monkeypatch.context() as broken, transaction.atomic():
        broken.setattr(lifecycle.end, "browser_task_project", lambda **kw: (_ for _ in ()).throw(RuntimeError("down")))
        lifecycle.task_end_locked(BrowserTask.objects.select_for_update().get(id=task.id), "failed", "Broke.")
    assert BrowserTask.objects.get(id=task.id).projected_at is None

    lifecycle.browser_tasks_reconcile()

    assert BrowserTask.objects.get(id=task.id).projected_at is not None
    texts = [m.parts[0]["text"] for m in Message.objects.filter(conversation_id=conversation)]
    assert texts == ["**Browser task failed.** Broke."]


def test_a_step_cut_off_by_a_crash_is_never_repeated_by_the_next_claim(conversation):
    proposal = propose(conversation)
    task = services.browser_task_start(conversation_id=conversation, proposal_id=proposal.id)
    claim = lifecycle.browser_task_claim(task_id=task.id)
    started = {"id": "step-1", "name": "click", "input": {"element": 3}, "result": None}
    lifecycle.browser_task_step_record(
        task_id=task.id, lease_token=claim.lease_token, progress=lifecycle.Progress([started], 1, 10, "", None)
    )
    BrowserTask.objects.filter(id=task.id).update(lease_expires_at=None)  # its worker died

    again = lifecycle.browser_task_claim(task_id=task.id)

    assert again.steps[0]["result"]["error"] == "interrupted"
    assert again.actions == 1
    assert lifecycle.browser_task_claim(task_id=task.id) is None  # held by the live attempt
    assert [s["result"]["error"] for s in BrowserTask.objects.get(id=task.id).steps] == ["interrupted"]


def test_deletion_erases_checkpoints(conversation):
    task, point = paused_task(conversation)
    BrowserTask.objects.filter(id=task.id).update(storage_sealed=lifecycle.storage_seal({"cookies": []}))

    assert lifecycle.browser_tasks_stop_for_deletion(conversation_id=conversation, timeout=1.0) is True

    task.refresh_from_db()
    assert (task.status, task.storage_sealed, task.steps) == ("cancelled", None, [])
    assert CriticalPoint.objects.get(id=point.id).state == "void"


def test_of_two_claims_at_once_only_the_first_wins_and_the_second_sees_its_lease(conversation):
    proposal = propose(conversation)
    task = services.browser_task_start(conversation_id=conversation, proposal_id=proposal.id)
    first_claimed = threading.Event()
    second_waiting = threading.Event()

    def first() -> lifecycle.TaskClaim | None:
        with transaction.atomic():  # holds the task's row until the second claim waits for it
            claim = lifecycle.browser_task_claim(task_id=task.id)
            first_claimed.set()
            assert second_waiting.wait(30)
            return claim

    def second() -> lifecycle.TaskClaim | None:
        assert first_claimed.wait(30)
        return lifecycle.browser_task_claim(task_id=task.id)

    def observer() -> None:
        assert first_claimed.wait(30)
        # The second claim must have begun and be waiting for the first one's row lock.
        waited = connection.vendor != "postgresql" or postgres_lock_awaited("transactionid")
        second_waiting.set()
        assert waited, "the second claim never waited for the first one's row lock"

    won, lost, observed = in_threads(first, second, observer)

    assert observed is None, observed
    assert isinstance(won, lifecycle.TaskClaim), won
    assert lost is None
    stored = BrowserTask.objects.get(id=task.id)
    assert (stored.lease_token, stored.attempts) == (won.lease_token, 1)
