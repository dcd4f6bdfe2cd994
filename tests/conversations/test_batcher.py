"""Group-committed streaming writes: one failing write never fails the other turns' writes."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import suppress

import psycopg
import pytest
from django.db import DatabaseError, connection

from conversations.engine.batcher import StreamWrite, WriteBatcher, _write_batch
from conversations.engine.preparation import attempt_start
from conversations.engine.runtime import stream_store_for_default_database
from conversations.engine.stream_store import APPLICATION_NAME
from conversations.eventlog import NewEvent, event_frame
from conversations.models import Conversation, Event, Message
from conversations.services import conversation_create
from conversations.turns import turn_submit
from tests.support.engine import orm
from tools.activity import Activity

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


def claimed_write(name: str, text: str) -> StreamWrite:
    conversation = conversation_create(name=name)
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Go")
    started = attempt_start(turn.id)
    assert started is not None
    claim, prepared = started
    parts = [{"type": "text", "text": text, "step": 0}]
    events: list[NewEvent] = [("text.delta", turn.id, {"text": text})]
    return StreamWrite(conversation.id, turn.id, claim.lease_token, prepared.assistant_message_id, parts, events)


def test_it_writes_a_batch_in_one_go(owner):
    first, second = claimed_write("A", "alpha"), claimed_write("B", "beta")

    results = _write_batch([first, second])

    assert [[f["event"] for f in frames or []] for frames in results] == [["text.delta"], ["text.delta"]]
    assert Message.objects.get(id=second.message_id).parts[0]["text"] == "beta"


def test_it_isolates_a_write_that_fails_and_keeps_the_others(owner):
    broken, fine = claimed_write("A", "alpha"), claimed_write("B", "beta")
    # An activity without its conversation violates a NOT NULL constraint in any database.
    bad = Activity(conversation_id=None, turn_id=broken.turn_id, tool_call_id="c1", kind="x", label="x")
    broken = StreamWrite(**{**broken.__dict__, "activities": (bad,)})

    results = _write_batch([broken, fine])

    assert results[0] is None
    assert results[1] is not None
    assert Message.objects.get(id=fine.message_id).parts[0]["text"] == "beta"
    assert Message.objects.get(id=broken.message_id).parts == []
    assert not Event.objects.filter(turn_id=broken.turn_id, kind="text.delta").exists()
    assert Event.objects.filter(turn_id=fine.turn_id, kind="text.delta").count() == 1


@pytest.fixture
async def batcher():
    """The engine's batcher for the configured database: one statement on the loop (PostgreSQL)."""
    store = stream_store_for_default_database()
    yield WriteBatcher(store=store)
    if store is not None:
        await store.close()


async def test_the_engine_batcher_stores_each_turns_window_with_consecutive_sequences(owner, batcher):
    first, second = await orm(claimed_write)("A", "alpha"), await orm(claimed_write)("B", "beta")
    two_events: list[NewEvent] = [
        ("text.delta", second.turn_id, {"text": "be"}),
        ("tool.started", second.turn_id, {"tool_call_id": "c1", "name": "x\u00e9"}),
    ]
    second = StreamWrite(**{**second.__dict__, "events": two_events})

    results = await asyncio.gather(batcher.write(first), batcher.write(second))

    stored = await orm(lambda: list(Event.objects.filter(turn_id__in=[first.turn_id, second.turn_id])))()
    for write, frames in zip((first, second), results, strict=True):
        assert frames is not None
        rows = sorted((e for e in stored if e.turn_id == write.turn_id), key=lambda e: e.sequence)
        assert [e.kind for e in rows] == ["turn.queued", "turn.started", *[kind for kind, _, _ in write.events]]
        assert [e.sequence for e in rows] == list(range(1, len(rows) + 1))
        assert frames == [event_frame(e) for e in rows[2:]]
        assert await orm(lambda w=write: Message.objects.get(id=w.message_id).parts)() == write.parts
    last = await orm(lambda: Conversation.objects.get(id=second.conversation_id).last_sequence)()
    assert last == results[1][-1]["sequence"]


async def test_the_engine_batcher_refuses_a_lost_lease_and_a_deleted_conversation_alone(owner, batcher):
    lost, gone, fine = [await orm(claimed_write)(name, name.lower()) for name in ("Lost", "Gone", "Fine")]
    lost = StreamWrite(**{**lost.__dict__, "lease_token": "another-attempt"})
    await orm(lambda: Conversation.objects.filter(id=gone.conversation_id).delete())()

    results = await asyncio.gather(*(batcher.write(w) for w in (lost, gone, fine)))

    assert results[0] is None
    assert results[1] is None
    assert [f["data"]["text"] for f in results[2] or []] == ["fine"]
    assert await orm(lambda: Message.objects.get(id=lost.message_id).parts)() == []
    kinds = await orm(lambda: list(Event.objects.filter(turn_id=lost.turn_id).values_list("kind", flat=True)))()
    assert kinds == ["turn.queued", "turn.started"]
    assert await orm(lambda: Message.objects.get(id=fine.message_id).parts)() == fine.parts


def drop_stream_connections() -> None:
    """End the engine's streaming sessions, as a database restart would (PostgreSQL)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name = %s",
                [APPLICATION_NAME],
            )
            assert cursor.fetchall() == [(True,)]


async def test_the_engine_batcher_writes_again_after_the_database_dropped_its_connection(owner, batcher):
    write = await orm(claimed_write)("A", "alpha")
    assert await batcher.write(write) is not None
    await orm(drop_stream_connections)()

    with suppress(DatabaseError, psycopg.Error):
        await batcher.write(write)  # the broken connection fails this one write, loudly
    frames = await batcher.write(write)

    assert frames is not None
    stored = await orm(lambda: Event.objects.filter(turn_id=write.turn_id, kind="text.delta").count())()
    assert stored in (2, 3)
    assert frames[0]["sequence"] == stored + 2  # after turn.queued and turn.started
