"""One event loop per worker process, in its own thread, that runs every turn's coroutine.

Celery's thread-pool task slots hand turns to this loop and wait for them, so dozens of
turns stream concurrently on one loop with shared SDK clients and channel-layer
connections, instead of a thread (and a client) per turn.
The loop also answers the turn doorbell (`doorbell.py`), which usually starts a turn
before its Celery task arrives; that task then waits for the running turn.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

from django.conf import settings

from conversations import sql
from conversations.cancel_bus import CancelListener
from conversations.doorbell import DoorbellListener
from conversations.engine.batcher import write_batcher_install
from conversations.engine.runner import run_turn
from conversations.providers.clients import clients_close
from flarebot.core.database import connect_database_threads

if TYPE_CHECKING:
    from conversations.engine.stream_store import StreamStore

T = TypeVar("T")

# Each database round trip hands the interpreter lock back and forth with the loop; the
# more threads do so at once, the longer a burst of turn starts takes in wall time, while
# too few make starts queue. Four is where the stream benchmark was fastest.
DATABASE_THREADS = 4


class EngineRuntime:
    def __init__(self) -> None:
        # The Celery consumer thread, the engine loop and its database threads share one
        # interpreter lock; a shorter switch interval keeps task receipt and the loop
        # responsive while the others work (with the default interval, bursts of turns queued).
        sys.setswitchinterval(0.001)
        self.loop = asyncio.new_event_loop()
        # Database calls of the turns run here, off the loop.
        executor = ThreadPoolExecutor(max_workers=DATABASE_THREADS, thread_name_prefix="turn-db")
        self.loop.set_default_executor(executor)
        connect_database_threads(executor, DATABASE_THREADS)
        writes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn-writes")
        connect_database_threads(writes, 1)
        self.stream_store = stream_store_for_default_database()
        write_batcher_install(self.loop, writes, self.stream_store)
        self.cancels = CancelListener()
        self._turns: dict[uuid.UUID, asyncio.Task[None]] = {}  # touched on the loop only
        self.doorbell = DoorbellListener(self.turn, capacity=settings.CONFIG.worker_concurrency)
        self._thread = threading.Thread(target=self.loop.run_forever, name="turn-engine", daemon=True)
        self._thread.start()
        self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self.doorbell.listen()))

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the engine loop and wait for its result (from a task slot)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def turn(self, turn_id: uuid.UUID) -> None:
        """Run a turn to its end, or wait for it if this process already runs it."""
        task = self._turns.get(turn_id)
        if task is None:
            task = self._turns[turn_id] = self.loop.create_task(run_turn(turn_id, cancels=self.cancels))
            task.add_done_callback(lambda _: self._turns.pop(turn_id, None))
        await asyncio.shield(task)

    def shutdown(self, timeout: float) -> None:
        """Answer no more rings and wait (at most `timeout`) for the turns the doorbell started."""
        self.doorbell.stop()
        drained = asyncio.run_coroutine_threadsafe(self.doorbell.drain(), self.loop)
        try:
            drained.result(timeout)
        except TimeoutError:
            drained.cancel()  # their leases expire and reconciliation retries them
        with suppress(TimeoutError):
            asyncio.run_coroutine_threadsafe(clients_close(), self.loop).result(5)
        if self.stream_store is not None:
            asyncio.run_coroutine_threadsafe(self.stream_store.close(), self.loop).result(5)


_runtime: EngineRuntime | None = None
_lock = threading.Lock()


def engine_runtime() -> EngineRuntime:
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = EngineRuntime()
        return _runtime


def engine_runtime_started() -> EngineRuntime | None:
    """Return this process's runtime if it was started."""
    return _runtime


def stream_store_for_default_database() -> StreamStore | None:
    """The engine loop's own connection if the database is PostgreSQL; None otherwise.

    psycopg loads only then: a worker on SQLite never needs it.
    """
    params = sql.stream_connection_params()
    if params is None:
        return None
    from conversations.engine.stream_store import APPLICATION_NAME, StreamStore

    return StreamStore({**params, "application_name": APPLICATION_NAME})
