"""Calls that arrive while a batch is in flight wait and go together in the next batch.

The engine's hot writes and reads are made this way: the streamed windows' writes, the
frames published to Redis, and the turns' starts and ends. One call alone goes at once (no
added latency); a hundred that arrive together cost a few round trips instead of a hundred.
The batch function returns one outcome per call, in order, and an exception among them is
that call's alone; a batch that raises fails each of its calls.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")

UNBOUNDED = sys.maxsize  # a batch takes every call that waits


class BatchedCalls(Generic[A, R]):
    def __init__(
        self, run_batch: Callable[[Sequence[A]], Awaitable[Sequence[R | Exception]]], *, in_flight: int, batch: int
    ) -> None:
        self._run_batch = run_batch
        self._in_flight = in_flight  # batches in flight at once
        self._batch = batch  # calls in one batch at most
        self._queue: list[tuple[A, asyncio.Future[R]]] = []
        self._drainers: set[asyncio.Task[None]] = set()

    async def call(self, argument: A) -> R:
        """Make the call in the next batch and return its own outcome (or raise its own error)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._queue.append((argument, future))
        if len(self._drainers) < self._in_flight:
            self._drainers.add(loop.create_task(self._drain()))
        return await future

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch, self._queue = self._queue[: self._batch], self._queue[self._batch :]
                outcomes: Sequence[R | Exception]
                try:
                    outcomes = await self._run_batch([argument for argument, _ in batch])
                    if len(outcomes) != len(batch):
                        raise RuntimeError(f"a batch of {len(batch)} calls gave {len(outcomes)} outcomes")
                except Exception as error:  # the batch itself failed: every call's error
                    outcomes = [error] * len(batch)
                for (_, future), outcome in zip(batch, outcomes, strict=True):
                    if future.done():
                        continue  # its caller was cancelled meanwhile
                    if isinstance(outcome, Exception):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
        finally:
            # Here, in the step that found the queue empty, not in a done callback: a call
            # made between this step and that callback would have found no free drainer
            # and waited for a batch that never came.
            task = asyncio.current_task()
            if task is not None:
                self._drainers.discard(task)
