"""Turn ends made together: a burst's ends share a transaction, and each turn's failure stays its own."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from conversations import turns
from conversations.engine import finishes
from conversations.engine.preparation import attempts_start
from conversations.models import Event, Turn
from conversations.services import conversation_create
from conversations.turns import Finish, turn_submit, turns_finish
from tests.support.engine import assistant_text, new_conversation, run, submit, turn_get
from tests.support.fake_providers import Text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


def running_turns(*questions: str) -> list[Finish]:
    """One running turn per question, each in a conversation of its own, as its attempt would end it."""
    turn_ids = []
    for question in questions:
        conversation = conversation_create(name=question)
        turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text=question)
        turn_ids.append(turn.id)
    ends = []
    for started in attempts_start(turn_ids):
        assert started is not None
        assert not isinstance(started, Exception)
        claim, _ = started
        ends.append(Finish(claim.turn_id, claim.lease_token, "completed"))
    return ends


def ended_events(turn_id: uuid.UUID) -> list[str]:
    return list(Event.objects.filter(turn_id=turn_id, kind__startswith="turn.").values_list("kind", flat=True))


def test_turns_that_ended_together_each_end_with_their_event_and_ring_their_next_turn(anthropic, monkeypatch):
    rung: list[uuid.UUID] = []
    monkeypatch.setattr(turns, "enqueue_turn", rung.append)
    first, second, third = running_turns("One?", "Two?", "Three?")
    waiting, _ = turn_submit(
        conversation_id=Turn.objects.get(id=second.turn_id).conversation_id, request_id=uuid.uuid4(), text="Next?"
    )
    rung.clear()  # the submits rang too

    outcomes = turns_finish([first, second, third])

    assert outcomes == [True, True, True]
    assert [Turn.objects.get(id=f.turn_id).status for f in (first, second, third)] == ["completed"] * 3
    assert all(ended_events(f.turn_id)[-1] == "turn.completed" for f in (first, second, third))
    assert rung == [waiting.id]  # the second conversation's queued turn, once its turn ended


def test_an_end_that_fails_in_a_batch_fails_only_its_own_turn(anthropic, monkeypatch):
    first, broken, third = running_turns("One?", "Two?", "Three?")
    finish = turns._finish

    def failing_for_broken(turn, status, **kwargs):
        if turn.id == broken.turn_id:
            raise RuntimeError("the search index could not be written")
        return finish(turn, status, **kwargs)

    monkeypatch.setattr(turns, "_finish", failing_for_broken)

    outcomes = turns_finish([first, broken, third])

    assert [outcomes[0], outcomes[2]] == [True, True]
    assert isinstance(outcomes[1], RuntimeError)
    # Its end went with the failure: it is still running, for its lease to run out and recovery to take it.
    assert Turn.objects.get(id=broken.turn_id).status == "running"
    assert "turn.completed" not in ended_events(broken.turn_id)
    # The others ended once each: one event each, though their batch was rolled back and made again.
    assert [ended_events(f.turn_id).count("turn.completed") for f in (first, third)] == [1, 1]


def test_an_end_under_a_lease_that_is_no_longer_its_own_changes_nothing(anthropic):
    first, stale, third = running_turns("One?", "Two?", "Three?")
    stolen = Finish(stale.turn_id, "another-attempts-token", "completed")

    outcomes = turns_finish([first, stolen, third])

    assert outcomes == [True, False, True]
    assert Turn.objects.get(id=stale.turn_id).status == "running"


def test_a_turn_listed_twice_in_a_batch_ends_once(anthropic):
    first, second = running_turns("One?", "Two?")

    outcomes = turns_finish([first, second, first])

    assert outcomes == [True, True, False]
    assert ended_events(first.turn_id).count("turn.completed") == 1


def test_a_stale_attempts_end_listed_first_does_not_keep_the_owners_end_from_its_turn(anthropic):
    owner, other = running_turns("One?", "Two?")
    stale = Finish(owner.turn_id, "an-earlier-attempts-token", "failed", "model_stalled", "Stalled.")

    outcomes = turns_finish([stale, other, owner])

    assert outcomes == [False, True, True]
    assert Turn.objects.get(id=owner.turn_id).status == "completed"


async def test_turns_that_end_at_once_are_ended_together_and_each_keeps_its_answer(
    anthropic, fake_providers, cancels, monkeypatch
):
    batches: list[int] = []

    def counted(ends):
        batches.append(len(ends))
        if len(batches) == 1:
            time.sleep(1.0)  # the first batch is slow: the turns that end meanwhile wait for it
        return turns_finish(ends)

    monkeypatch.setattr(finishes, "turns_finish", counted)
    fake_providers.script(*[[Text(f"Answer {n}.")] for n in range(6)])
    started = [await submit(await new_conversation(), f"Question {n}?") for n in range(6)]

    await asyncio.gather(*(run(turn.id, cancels) for turn in started))

    assert sum(batches) == 6
    # The ends that came while the first batch was written went together in the next one
    # (or all six came before it started: one batch).
    assert len(batches) <= 2
    answers = sorted([await assistant_text(turn.id) for turn in started])
    assert answers == [f"Answer {n}." for n in range(6)]
    assert {(await turn_get(turn.id)).status for turn in started} == {"completed"}
