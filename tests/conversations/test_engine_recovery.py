"""The turn engine when things go wrong: cancellation, stalls, dropped streams, crashed
workers, duplicate deliveries and turns that must wait for the one before them.

The stall watchdog is 3 s in the test settings (FLAREBOT_STREAM_IDLE_TIMEOUT).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
import redis
from django.conf import settings as django_settings
from django.utils import timezone

from conversations import doorbell
from conversations.models import Message, Turn
from conversations.turns import turn_cancel, turn_claim, turn_submit, turns_reconcile
from tests.support.engine import (
    ask,
    assistant_text,
    events,
    eventually,
    kinds,
    new_conversation,
    orm,
    run,
    sent,
    submit,
    turn_get,
    turn_is,
)
from tests.support.fake_providers import Drop, Stall, Text

pytestmark = pytest.mark.django_db(transaction=True)

STALLED = {"code": "model_stalled", "message": "The model stopped responding. Try again in a moment."}
IDLE_LIMIT = 3.0


async def deltas(conversation_id: uuid.UUID) -> list[str]:
    return [e.data["text"] for e in await events(conversation_id) if e.kind == "text.delta"]


async def test_it_cancels_a_streaming_turn_long_before_its_end_and_keeps_the_partial_answer(
    provider, fake_providers, cancels
):
    chunks = [f"Chapter {i}. " for i in range(60)]  # 30 s if nobody stopped it
    fake_providers.script([Text(chunk, delay=0.5) for chunk in chunks])
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Tell me a long story.")
    running = asyncio.ensure_future(run(turn.id, cancels))
    try:
        await eventually(lambda: deltas(conversation_id), timeout=30, what="the first text delta")
        await orm(turn_cancel)(conversation_id=conversation_id)
        await eventually(lambda: turn_is(turn.id, "cancelled"), timeout=20, what="the turn to be cancelled")
        await asyncio.wait_for(running, 20)
    finally:
        running.cancel()

    partial = await assistant_text(turn.id)
    assert partial == "".join(await deltas(conversation_id))
    assert partial
    assert "".join(chunks).startswith(partial)
    assert len(partial) < len("".join(chunks))
    assert (await kinds(conversation_id))[-1] == "turn.cancelled"
    [request] = fake_providers.requests
    await eventually(lambda: client_gone(request), timeout=20, what="the provider to see the client leave")
    assert request.ended is not None
    assert request.ended - request.started < 0.5 * len(chunks)  # it stopped reading long before the end

    fake_providers.script([Text("Here is a short one.")])
    following = await ask(conversation_id, "A short one, then.", cancels)

    assert following.status == "completed"
    assert await assistant_text(following.id) == "Here is a short one."
    assert sent(provider, fake_providers.requests[-1].body).transcript == [
        ("user", "Tell me a long story."),
        ("assistant", partial),
        ("user", "A short one, then."),
    ]


async def client_gone(request) -> bool:
    return request.disconnected


async def test_it_retries_an_answer_that_stalls_after_its_first_chunk(anthropic, fake_providers, cancels):
    fake_providers.script([Text("The answer"), Stall(10), Text(" never comes")], [Text("The answer is 42.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "What is the answer?", cancels)

    assert turn.status == "completed"
    stalled, retried = fake_providers.requests
    assert IDLE_LIMIT - 0.5 < retried.started - stalled.started < IDLE_LIMIT + 3
    # The unfinished step is asked again from the start: its partial text is dropped
    # (clients get the parts to show instead) rather than repeated before the new answer.
    assert sent(anthropic, retried.body).transcript == [("user", "What is the answer?")]
    assert await assistant_text(turn.id) == "The answer is 42."
    assert await deltas(conversation_id) == ["The answer", "The answer is 42."]
    assert await kinds(conversation_id) == [
        "turn.queued",
        "turn.started",
        "text.delta",
        "turn.started",
        "message.replaced",
        "text.delta",
        "turn.completed",
    ]
    started = [e.data for e in await events(conversation_id) if e.kind == "turn.started"]
    assert started == [{"attempt": 1}, {"attempt": 2}]
    replaced = [e.data for e in await events(conversation_id) if e.kind == "message.replaced"]
    assert replaced == [{"parts": []}]
    assert turn.attempts == 2


async def test_it_fails_a_turn_whose_model_stalls_three_times_in_a_row(anthropic, fake_providers, cancels):
    fake_providers.script([Stall(10)], [Stall(10)], [Stall(10)], [Text("Too late.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Hello?", cancels)

    assert (turn.status, turn.error_code, turn.error_message) == ("failed", STALLED["code"], STALLED["message"])
    assert len(fake_providers.requests) == 3
    rows = await events(conversation_id)
    # Each attempt is announced; the third one's stall ends the turn.
    assert [e.kind for e in rows] == ["turn.queued", "turn.started", "turn.started", "turn.started", "turn.failed"]
    assert [e.data for e in rows[1:4]] == [{"attempt": 1}, {"attempt": 2}, {"attempt": 3}]
    assert rows[-1].data == STALLED
    assert await assistant_text(turn.id) == ""


async def test_it_answers_with_the_attempt_that_succeeds_after_a_stall(anthropic, fake_providers, cancels):
    fake_providers.script([Stall(10)], [Text("A fresh answer.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Hello?", cancels)

    assert turn.status == "completed"
    assert turn.attempts_without_progress == 0  # the stall was forgotten once the answer came
    assert await assistant_text(turn.id) == "A fresh answer."
    assert await deltas(conversation_id) == ["A fresh answer."]
    assert sent(anthropic, fake_providers.requests[1].body).transcript == [("user", "Hello?")]


async def test_it_retries_a_dropped_connection(provider, fake_providers, cancels):
    fake_providers.script([Text("Half an"), Drop()], [Text("A whole answer.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Go on.", cancels)

    assert turn.status == "completed"
    dropped, retried = fake_providers.requests
    assert dropped.disconnected
    assert sent(provider, retried.body).transcript == [("user", "Go on.")]
    assert await assistant_text(turn.id) == "A whole answer."


async def test_it_fails_a_turn_whose_connection_drops_three_times_in_a_row(anthropic, fake_providers, cancels):
    fake_providers.script([Drop()], [Drop()], [Drop()], [Text("Too late.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Hello?", cancels)

    assert (turn.status, turn.error_code) == ("failed", "provider_connection")
    assert turn.error_message == (
        "The connection to Anthropic broke off in the middle of the answer. Try again; if it keeps happening, "
        "check this server's network."
    )
    assert len(fake_providers.requests) == 3
    assert (await events(conversation_id))[-1].data == {"code": turn.error_code, "message": turn.error_message}


async def test_it_stores_one_turn_for_a_repeated_request_id(anthropic, fake_providers):
    conversation_id = await new_conversation()
    request_id = uuid.uuid4()

    first, created = await orm(turn_submit)(conversation_id=conversation_id, request_id=request_id, text="Hi")
    again, created_again = await orm(turn_submit)(conversation_id=conversation_id, request_id=request_id, text="Hi")

    assert (created, created_again) == (True, False)
    assert again.id == first.id
    assert await orm(Message.objects.filter(conversation_id=conversation_id).count)() == 1
    assert await orm(Turn.objects.filter(conversation_id=conversation_id).count)() == 1
    assert await kinds(conversation_id) == ["turn.queued"]


async def test_it_runs_a_later_turn_only_after_the_earlier_one(anthropic, fake_providers, cancels):
    fake_providers.script([Text("First answer.")], [Text("Second answer.")])
    conversation_id = await new_conversation()
    first = await submit(conversation_id, "First question.")
    second = await submit(conversation_id, "Second question.")

    await run(second.id, cancels)

    assert (await turn_get(second.id)).status == "queued"
    assert await orm(turn_claim)(turn_id=second.id) is None
    assert fake_providers.requests == []

    await run(first.id, cancels)
    await run(second.id, cancels)

    assert [(await turn_get(t.id)).status for t in (first, second)] == ["completed", "completed"]
    assert await assistant_text(second.id) == "Second answer."
    assert sent(anthropic, fake_providers.requests[1].body).transcript == [
        ("user", "First question."),
        ("assistant", "First answer."),
        ("user", "Second question."),
    ]
    rows = await events(conversation_id)
    first_done = next(e.sequence for e in rows if e.kind == "turn.completed" and e.turn_id == first.id)
    second_started = next(e.sequence for e in rows if e.kind == "turn.started" and e.turn_id == second.id)
    assert first_done < second_started


async def test_it_ignores_a_duplicate_delivery_while_a_live_lease_owns_the_turn(anthropic, fake_providers, cancels):
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Hello?")
    claim = await orm(turn_claim)(turn_id=turn.id)
    assert claim is not None

    await asyncio.wait_for(run(turn.id, cancels), 1)

    assert fake_providers.requests == []
    owned = await turn_get(turn.id)
    assert (owned.status, owned.lease_token, owned.attempts) == ("running", claim.lease_token, 1)
    assert await kinds(conversation_id) == ["turn.queued", "turn.started"]


async def expire_lease(turn_id: uuid.UUID) -> None:
    await orm(Turn.objects.filter(id=turn_id).update)(lease_expires_at=timezone.now() - timedelta(seconds=1))


def enqueued_runs(turn_id: uuid.UUID) -> int:
    """How many times this turn was enqueued: its rings waiting on the turn doorbell.

    Each enqueue rings at once (its Celery task follows a moment later).
    """
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    try:
        return sum(str(turn_id).encode() == raw for raw in client.lrange(doorbell.KEY, 0, -1))
    finally:
        client.close()


async def test_it_requeues_a_turn_whose_worker_died_until_it_gives_up(anthropic, fake_providers):
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Hello?")
    assert await orm(turn_claim)(turn_id=turn.id) is not None
    assert await orm(turns_reconcile)() == 0  # a live lease is left alone

    for attempt in (2, 3):
        await expire_lease(turn.id)
        queued_before = await orm(enqueued_runs)(turn.id)
        assert await orm(turns_reconcile)() == 1
        assert await orm(enqueued_runs)(turn.id) == queued_before + 1
        claim = await orm(turn_claim)(turn_id=turn.id)
        assert claim is not None
        assert claim.attempt == attempt
        assert (await turn_get(turn.id)).attempts_without_progress == attempt - 1

    await expire_lease(turn.id)
    assert await orm(turns_reconcile)() == 1
    assert await orm(turn_claim)(turn_id=turn.id) is None

    failed = await turn_get(turn.id)
    assert (failed.status, failed.error_code) == ("failed", "turn_interrupted")
    rows = await events(conversation_id)
    assert [e.kind for e in rows] == ["turn.queued", "turn.started", "turn.started", "turn.started", "turn.failed"]
    assert rows[-1].data == {"code": "turn_interrupted", "message": failed.error_message}
    assert "Send your message again" in failed.error_message
    assert fake_providers.requests == []
