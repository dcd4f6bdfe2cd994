"""Group commit for streaming writes: every turn on a worker shares one writer.

While one batch is being written, the writes that arrive queue up and go together in
the next transaction. One stream alone is written at once (no added latency); a hundred
streams cost a few transactions per window instead of a hundred. Each write checks in
the same statement that its attempt still owns the turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from django.db import DatabaseError, transaction

from conversations import sql
from conversations.engine.writes import StreamWrite
from conversations.eventlog import EventFrame, events_insert
from conversations.models import Conversation
from flarebot.core.batching import UNBOUNDED, BatchedCalls
from flarebot.core.database import db
from flarebot.core.loops import PerLoop
from tools.activity import activity_store

if TYPE_CHECKING:
    from conversations.engine.stream_store import StreamStore

logger = logging.getLogger(__name__)


def _write_one(write: StreamWrite) -> int | None:
    """Store one write's parts and reserve its sequences; None if its attempt lost the turn."""
    first = sql.message_parts_store(
        conversation_id=write.conversation_id,
        message_id=write.message_id,
        parts=write.parts,
        turn_id=write.turn_id,
        lease_token=write.lease_token,
        events=len(write.events),
    )
    if first is None:
        return None
    for activity in write.activities:
        activity_store(activity)
    return first


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
    firsts: list[int | None] = []
    with transaction.atomic():
        # Streamed text is written every 40 ms; waiting for each WAL flush would bound
        # every stream by the disk's fsync latency. A PostgreSQL crash can lose the last
        # fraction of a second of deltas (the turn is then recovered like any interrupted
        # one); a worker crash loses nothing committed.
        sql.synchronous_commit_off_for_transaction()
        for write in writes:
            if isolated:
                try:
                    with transaction.atomic():
                        firsts.append(_write_one(write))
                except (DatabaseError, Conversation.DoesNotExist):
                    logger.warning("streaming write of turn %s failed; its attempt stops", write.turn_id, exc_info=True)
                    firsts.append(None)
            else:
                firsts.append(_write_one(write))
        frames = iter(
            events_insert(
                [
                    (w.conversation_id, first, w.events)
                    for w, first in zip(writes, firsts, strict=True)
                    if first is not None
                ]
            )
        )
    return [
        None if first is None else [next(frames) for _ in write.events]
        for write, first in zip(writes, firsts, strict=True)
    ]


class WriteBatcher:
    def __init__(self, executor: ThreadPoolExecutor | None = None, store: StreamStore | None = None) -> None:
        self._executor = executor
        self._store = store
        self._calls: BatchedCalls[StreamWrite, list[EventFrame] | None] = BatchedCalls(
            self._write_batch, in_flight=1, batch=UNBOUNDED
        )

    async def write(self, write: StreamWrite) -> list[EventFrame] | None:
        return await self._calls.call(write)

    async def _write_batch(self, writes: Sequence[StreamWrite]) -> list[list[EventFrame] | None]:
        if self._store is not None and not any(write.activities for write in writes):
            return await self._store.write_batch(list(writes))
        return await db(_write_batch, executor=self._executor)(list(writes))


_batchers: PerLoop[WriteBatcher] = PerLoop(WriteBatcher)


def write_batcher() -> WriteBatcher:
    """Return the batcher of the running event loop."""
    return _batchers.get()


def write_batcher_install(
    loop: asyncio.AbstractEventLoop, executor: ThreadPoolExecutor, store: StreamStore | None = None
) -> None:
    """Give a loop's batcher a thread of its own (the engine's), apart from the claims' threads.

    Only one batch is in flight at a time, so one thread suffices; sharing the other
    database threads made windows wait behind a burst of turn starts, and starts behind
    windows. With a `store` (PostgreSQL), windows without tool activity are written on the
    loop itself instead (`stream_store.py`).
    """
    _batchers.install(loop, WriteBatcher(executor, store))
