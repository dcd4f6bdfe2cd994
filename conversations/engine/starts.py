"""Turn starts that arrive together are claimed together, a few database trips per burst.

A burst of rings (a hundred conversations answered at once, or a worker coming back to a
queue) would otherwise cost each turn its own transaction: a settings read, the claim,
the transcript, a commit, each a round trip that competes with the streams already
running. Here the starts that wait while others are being claimed go in the next batch
(`preparation.attempts_start`): one transaction for all of them. A turn alone starts at
once, as before; one failing start fails only its own turn.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref

from conversations.engine.preparation import Started, attempts_start
from flarebot.core.database import db

# Batches claimed at once: a second one starts while the first is in its transaction, so a
# ring that arrives then waits for no batch but its own; more would only share the CPU.
IN_FLIGHT = 2
# At most this many turns in one transaction (the doorbell hands out 32 at a time): its
# row locks are held until the last of them is prepared.
BATCH = 32


class StartBatcher:
    def __init__(self) -> None:
        self._queue: list[tuple[uuid.UUID, asyncio.Future[Started | None]]] = []
        self._drainers: set[asyncio.Task[None]] = set()

    async def start(self, turn_id: uuid.UUID) -> Started | None:
        """Claim and prepare a turn's attempt (see `attempt_start`); None when it may not run here."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Started | None] = loop.create_future()
        self._queue.append((turn_id, future))
        if len(self._drainers) < IN_FLIGHT:
            drainer = loop.create_task(self._drain())
            self._drainers.add(drainer)
            drainer.add_done_callback(self._drainers.discard)
        return await future

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:BATCH], self._queue[BATCH:]
            try:
                outcomes = await db(attempts_start)([turn_id for turn_id, _ in batch])
            except Exception as error:  # the database thread itself failed: every turn's error
                outcomes = [error] * len(batch)
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue  # its turn was cancelled meanwhile; a claim it got expires
                if isinstance(outcome, Exception):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome)


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StartBatcher] = weakref.WeakKeyDictionary()


def start_batcher() -> StartBatcher:
    """The running event loop's batcher of turn starts."""
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = StartBatcher()
    return batcher
