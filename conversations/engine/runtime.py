"""One event loop per worker process, in its own thread, that runs every turn's coroutine.

Celery's thread-pool task slots hand turns to this loop and wait for them, so dozens of
turns stream concurrently on one loop with shared SDK clients and channel-layer
connections (measured here: about twice as fast to first delta as a thread per turn).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from conversations.engine.cancel_bus import CancelListener

T = TypeVar("T")


class EngineRuntime:
    def __init__(self) -> None:
        # The Celery consumer thread, the engine loop and its database threads share one
        # interpreter lock; a shorter switch interval keeps task receipt and the loop
        # responsive while the others work (the default 5 ms queued bursts of turns).
        sys.setswitchinterval(0.001)
        self.loop = asyncio.new_event_loop()
        # Database calls of the turns run here, off the loop.
        self.loop.set_default_executor(ThreadPoolExecutor(max_workers=8, thread_name_prefix="turn-db"))
        self.cancels = CancelListener()
        self._thread = threading.Thread(target=self.loop.run_forever, name="turn-engine", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the engine loop and wait for its result (from a task slot)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


_runtime: EngineRuntime | None = None
_lock = threading.Lock()


def engine_runtime() -> EngineRuntime:
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = EngineRuntime()
        return _runtime
