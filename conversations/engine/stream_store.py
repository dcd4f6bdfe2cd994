"""PostgreSQL: a batch of streamed windows stored in one statement, on the engine loop.

Every window of every stream is written here, so this is the engine's hottest write. It
runs on a connection of the engine loop's own (psycopg's `AsyncConnection`): no hand-off
to a database thread and back, no ORM cursor, and one round trip for the whole batch
(the parts with their lease check, the conversations' sequences and the events). On this
machine, handing each batch to a thread cost the worker more CPU than the database spent
on the batch. SQLite, and windows that carry tool activity, take the threaded path in
`batcher.py`, which keeps the same rules.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import psycopg
from django.utils import timezone

from conversations import sql
from conversations.engine.writes import StreamWrite
from conversations.eventlog import EventFrame, event_frame_of
from conversations.models import TurnStatus

logger = logging.getLogger(__name__)

APPLICATION_NAME = "flarebot-stream-writes"  # how its sessions show in pg_stat_activity


def _batch_params(writes: list[StreamWrite]) -> dict[str, Any]:
    document = [
        {
            "idx": i,
            "message_id": str(write.message_id),
            "parts": write.parts,
            "turn_id": str(write.turn_id),
            "lease_token": write.lease_token,
            "conversation_id": str(write.conversation_id),
            "events": [
                {"kind": kind, "turn_id": str(turn_id) if turn_id else None, "data": data}
                for kind, turn_id, data in write.events
            ],
        }
        for i, write in enumerate(writes)
    ]
    return {
        "writes": json.dumps(document, separators=(",", ":")),
        "running": TurnStatus.RUNNING.value,
        "now": timezone.now(),
    }


class StreamStore:
    """The engine loop's own PostgreSQL connection for streamed windows (one batch at a time)."""

    def __init__(self, params: dict[str, Any]) -> None:
        self._params = params
        self._connection: psycopg.AsyncConnection[Any] | None = None

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        if self._connection is None or self._connection.closed:
            connection = await psycopg.AsyncConnection.connect(**self._params, autocommit=True)
            # Commits without waiting for the WAL flush, as the threaded path's (batcher.py says why).
            await connection.execute(sql.STREAM_SESSION_SETUP)
            self._connection = connection
        return self._connection

    async def write_batch(self, writes: list[StreamWrite]) -> list[list[EventFrame] | None]:
        """Write a batch; None for a write whose attempt lost the turn (or whose write failed).

        If the batch fails (a conversation deleted while it was written, say), each write
        is tried again alone, so that one write cannot fail the other turns' writes.
        """
        try:
            return await self._write(writes)
        except psycopg.Error:
            if self._connection is None:  # the connection broke: every write failed alike
                raise
        results: list[list[EventFrame] | None] = []
        for write in writes:
            try:
                results += await self._write([write])
            except psycopg.Error:
                if self._connection is None:
                    raise
                logger.warning("streaming write of turn %s failed; its attempt stops", write.turn_id, exc_info=True)
                results.append(None)
        return results

    async def _write(self, writes: list[StreamWrite]) -> list[list[EventFrame] | None]:
        connection = await self._connect()
        try:
            cursor = await connection.execute(sql.stream_batch_sql(), _batch_params(writes))
        except psycopg.Error:
            if connection.broken:
                self._connection = None
            raise
        before = dict(await cursor.fetchall())
        results: list[list[EventFrame] | None] = []
        for i, write in enumerate(writes):
            if i not in before:
                results.append(None)  # the attempt lost the turn (or the conversation is gone)
                continue
            first = before[i] + 1
            results.append(
                [
                    event_frame_of(sequence=first + k, kind=kind, turn_id=turn_id, data=data)
                    for k, (kind, turn_id, data) in enumerate(write.events)
                ]
            )
        return results

    async def close(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()
