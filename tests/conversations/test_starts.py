"""Turn starts claimed together: a burst's turns share a transaction, and each turn's failure stays its own."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from conversations.engine import preparation, starts
from conversations.engine.preparation import attempts_start
from conversations.models import Message, Turn
from conversations.services import conversation_create
from conversations.turns import turn_cancel, turn_submit
from tests.support.engine import assistant_text, new_conversation, run, submit, turn_get
from tests.support.fake_providers import Text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


def queued_turns(*questions: str) -> list[uuid.UUID]:
    """One queued turn per question, each in a conversation of its own."""
    turn_ids = []
    for question in questions:
        conversation = conversation_create(name=question)
        turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text=question)
        turn_ids.append(turn.id)
    return turn_ids


def last_user_text(started: preparation.Started) -> str:
    return preparation.last_user_text(started[1].transcript)


def test_turns_that_rang_together_each_start_with_their_own_question_and_answer(anthropic, monkeypatch):
    reads = []
    snapshot = preparation.turn_model_snapshot
    monkeypatch.setattr(preparation, "turn_model_snapshot", lambda: reads.append(1) or snapshot())
    first, second, third = queued_turns("Capital of Peru?", "Capital of Chile?", "Capital of Bolivia?")

    outcomes = attempts_start([first, second, third])

    assert [o[0].turn_id for o in outcomes] == [first, second, third]
    assert [last_user_text(o) for o in outcomes] == ["Capital of Peru?", "Capital of Chile?", "Capital of Bolivia?"]
    assert len({o[1].assistant_message_id for o in outcomes}) == 3
    assert [Turn.objects.get(id=t).status for t in (first, second, third)] == ["running"] * 3
    assert Message.objects.filter(turn_id__in=[first, second, third], role="assistant").count() == 3
    assert reads == [1]  # the settings were read once for the three


def test_a_start_that_fails_in_a_batch_fails_only_its_own_turn(anthropic, monkeypatch):
    first, broken, third = queued_turns("One?", "Two?", "Three?")
    prepare = preparation._prepare

    def failing_for_broken(claim, **kwargs):
        if claim.turn_id == broken:
            raise RuntimeError("the transcript could not be read")
        return prepare(claim, **kwargs)

    monkeypatch.setattr(preparation, "_prepare", failing_for_broken)

    outcomes = attempts_start([first, broken, third])

    assert isinstance(outcomes[1], RuntimeError)
    assert [last_user_text(outcomes[0]), last_user_text(outcomes[2])] == ["One?", "Three?"]
    # Its claim went with the failure: it waits to be started again, with no answer begun.
    assert Turn.objects.get(id=broken).status == "queued"
    assert Turn.objects.get(id=broken).attempts == 0
    assert not Message.objects.filter(turn_id=broken, role="assistant").exists()
    assert [Turn.objects.get(id=t).status for t in (first, third)] == ["running", "running"]


def test_a_turn_cancelled_before_its_batch_is_finished_and_the_others_start(anthropic):
    first, cancelled, third = queued_turns("One?", "Two?", "Three?")
    turn_cancel(conversation_id=Turn.objects.get(id=cancelled).conversation_id)

    outcomes = attempts_start([first, cancelled, third])

    assert outcomes[1] is None
    assert Turn.objects.get(id=cancelled).status == "cancelled"
    assert [Turn.objects.get(id=t).status for t in (first, third)] == ["running", "running"]


def test_a_turn_listed_twice_in_a_batch_starts_once(anthropic):
    first, second = queued_turns("One?", "Two?")

    outcomes = attempts_start([first, second, first])

    assert outcomes[0] is not None
    assert outcomes[1] is not None
    assert outcomes[2] is None
    assert Turn.objects.get(id=first).attempts == 1


async def test_turns_started_at_once_are_claimed_together_and_each_streams_its_own_answer(
    anthropic, fake_providers, cancels, monkeypatch
):
    batches: list[int] = []

    def counted(turn_ids):
        batches.append(len(turn_ids))
        return attempts_start(turn_ids)

    monkeypatch.setattr(starts, "attempts_start", counted)
    fake_providers.script(*[[Text(f"Answer {n}.")] for n in range(6)])
    turns = [await submit(await new_conversation(), f"Question {n}?") for n in range(6)]

    await asyncio.gather(*(run(turn.id, cancels) for turn in turns))

    assert batches == [6]
    answers = sorted([await assistant_text(turn.id) for turn in turns])
    assert answers == [f"Answer {n}." for n in range(6)]
    assert {(await turn_get(turn.id)).status for turn in turns} == {"completed"}


async def test_a_failed_start_reaches_only_the_turn_that_waited_for_it(anthropic, fake_providers, cancels, monkeypatch):
    fake_providers.script([Text("Fine.")])
    good, broken = [await submit(await new_conversation(), text) for text in ("Fine?", "Broken?")]

    def failing(turn_ids):
        return [
            RuntimeError("no database") if turn_id == broken.id else attempts_start([turn_id])[0]
            for turn_id in turn_ids
        ]

    monkeypatch.setattr(starts, "attempts_start", failing)
    outcomes = await asyncio.gather(run(good.id, cancels), run(broken.id, cancels), return_exceptions=True)

    assert outcomes[0] is None
    assert isinstance(outcomes[1], RuntimeError)
    assert await assistant_text(good.id) == "Fine."
