"""Waiting in synchronous code for something another process does: one poll loop for all.

A teardown waits for workers to let go of what they hold (turns, browser tasks); it asks the
database again and again, and gives up after a bound so that a stuck worker cannot keep it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_SECONDS = 0.1


def wait_until(done: Callable[[], bool], *, timeout: float, every: float = POLL_SECONDS) -> bool:
    """Ask `done` until it holds; False if it still did not at `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= give_up:
            return False
        time.sleep(every)
    return True
