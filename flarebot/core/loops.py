"""One object per running event loop: made on its first use there, gone with its loop.

The engine's batchers, its publisher and its SDK clients each hold state that belongs to
one event loop (a queue of futures, a connection pool); a worker's loop, a test's loop and
a thread's own loop must never share it. Keyed weakly, so a closed loop takes its object
with it.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._objects: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()

    def get(self) -> T:
        """The running loop's object, made now if it has none."""
        loop = asyncio.get_running_loop()
        found = self._objects.get(loop)
        if found is None:
            found = self._objects[loop] = self._factory()
        return found

    def install(self, loop: asyncio.AbstractEventLoop, value: T) -> None:
        """Give a loop this object in place of the one the factory would make."""
        self._objects[loop] = value

    def take(self) -> T | None:
        """Remove and return the running loop's object, if it has one."""
        return self._objects.pop(asyncio.get_running_loop(), None)
