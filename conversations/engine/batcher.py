"""Group commit for streaming writes: every turn on a worker shares one writer.

While one batch is being written, the writes that arrive queue up and go together in
the next transaction. One stream alone is written at once (no added latency); a hundred
streams cost a few transactions per window instead of a hundred. Each write checks in
the same statement that its attempt still owns the turn.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from conversations.engine.database import db
from conversations.eventlog import EventFrame, NewEvent, event_frame, sequences_allocate
from conversations.models import Conversation, Event, Message, Turn, TurnStatus
from tools.activity import Activity, activity_store

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamWrite:
    conversation_id: uuid.UUID
    turn_id: uuid.UUID
    lease_token: str
    message_id: uuid.UUID
    parts: list[dict[str, Any]]
    events: list[NewEvent]
    activities: tuple[Activity, ...] = ()  # tool activity stored with the events announcing it


def _store_parts_sql(connection: BaseDatabaseWrapper) -> str:
    quote = connection.ops.quote_name
    return (
        f"UPDATE {quote(Message._meta.db_table)} SET parts = %s WHERE id = %s AND EXISTS ("  # noqa: S608
        f"SELECT 1 FROM {quote(Turn._meta.db_table)} WHERE id = %s AND lease_token = %s AND status = %s)"
    )


def _write_one(write: StreamWrite) -> int | None:
    """Store one write's parts and reserve its sequences; None if its attempt lost the turn.

    Plain SQL: this runs for every window of every stream, and building the same ORM
    update each time cost more CPU than the database spent on it.
    """
    connection = transaction.get_connection()
    parts_field, message_pk, turn_pk = Message._meta.get_field("parts"), Message._meta.pk, Turn._meta.pk
    assert message_pk is not None
    assert turn_pk is not None
    with connection.cursor() as cursor:
        cursor.execute(
            _store_parts_sql(connection),
            [
                parts_field.get_db_prep_value(write.parts, connection),
                message_pk.get_db_prep_value(write.message_id, connection),
                turn_pk.get_db_prep_value(write.turn_id, connection),
                write.lease_token,
                TurnStatus.RUNNING.value,
            ],
        )
        if cursor.rowcount != 1:
            return None
    for activity in write.activities:
        activity_store(activity)
    return sequences_allocate(conversation_id=write.conversation_id, count=len(write.events))


def _write_batch(writes: list[StreamWrite]) -> list[list[EventFrame] | None]:
    """Write a batch in one transaction; None for a write whose attempt lost the turn.

    Optimistic: the whole batch without savepoints (half the round trips). If any write
    fails (its conversation was just deleted, say), the batch is written again with a
    savepoint per write, so that one write cannot fail the other turns' writes.
    """
    try:
        return _write_batch_once(writes, isolated=False)
    except (DatabaseError, Conversation.DoesNotExist):
        return _write_batch_once(writes, isolated=True)


def _write_batch_once(writes: list[StreamWrite], *, isolated: bool) -> list[list[EventFrame] | None]:
    results: list[list[EventFrame] | None] = []
    rows: list[Event] = []
    with transaction.atomic():
        connection = transaction.get_connection()
        if connection.vendor == "postgresql":
            # Streamed text is written every 40 ms; waiting for each WAL flush would
            # bound every stream by the disk's fsync latency. A PostgreSQL crash can lose
            # the last fraction of a second of deltas (the turn is then recovered like
            # any interrupted one); a worker crash loses nothing committed.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        for write in writes:
            if isolated:
                try:
                    with transaction.atomic():
                        first = _write_one(write)
                except (DatabaseError, Conversation.DoesNotExist):
                    logger.warning("streaming write of turn %s failed; its attempt stops", write.turn_id, exc_info=True)
                    first = None
            else:
                first = _write_one(write)
            if first is None:
                results.append(None)
                continue
            batch = [
                Event(conversation_id=write.conversation_id, sequence=first + i, kind=kind, turn_id=turn_id, data=data)
                for i, (kind, turn_id, data) in enumerate(write.events)
            ]
            rows += batch
            results.append([event_frame(row) for row in batch])
        Event.objects.bulk_create(rows)
    return results


class WriteBatcher:
    def __init__(self) -> None:
        self._queue: list[tuple[StreamWrite, asyncio.Future[list[EventFrame] | None]]] = []
        self._draining = False

    async def write(self, write: StreamWrite) -> list[EventFrame] | None:
        future: asyncio.Future[list[EventFrame] | None] = asyncio.get_running_loop().create_future()
        self._queue.append((write, future))
        if not self._draining:
            self._draining = True
            asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    results = await db(_write_batch)([write for write, _ in batch])
                except Exception as error:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._draining = False


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WriteBatcher] = weakref.WeakKeyDictionary()


def write_batcher() -> WriteBatcher:
    """Return the batcher of the running event loop."""
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = WriteBatcher()
    return batcher
