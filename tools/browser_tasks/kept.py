"""Contexts of paused browser tasks, kept in the worker that paused them for a while.

A paused task releases its worker slot but its context stays open in this process's
browser for `FLAREBOT_BROWSER_TASK_KEEP` seconds, so the owner's reply can resume it
exactly where it stopped. Only this process can use it: a reply handled elsewhere asks
this process to wake the task here (the lease's wake request, which the pool's watcher
polls and hands to the `on_wake` callback given when the context was kept). When the time
is up the context is closed (a failed close is left to the lease cleanup job; the lease's
expiry says when the sweep takes over). Whoever resumes elsewhere first asks for the
close and waits until it is confirmed, so a context is never used in two places.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from tools.browser_tasks.session import BrowserSession, session_lease_extend
from tools.web.browser import CLOSE_TIMEOUT, browser_pool

logger = logging.getLogger(__name__)


@dataclass
class Kept:
    session: BrowserSession
    timer: asyncio.TimerHandle


class KeptSessions:
    """The kept sessions of one event loop (a worker's engine loop), by task id."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._kept: dict[uuid.UUID, Kept] = {}

    async def keep(self, session: BrowserSession, *, on_wake: Callable[[], None]) -> None:
        """Keep a paused task's session for the configured time; `on_wake` runs on a wake request."""
        seconds = settings.CONFIG.browser_task_keep
        await session_lease_extend(session, seconds=seconds + CLOSE_TIMEOUT)
        self.release(session.task_id)
        timer = self.loop.call_later(seconds, self._expire, session.task_id, session.lease_id)
        self._kept[session.task_id] = Kept(session, timer)
        browser_pool().wakers[session.lease_id] = on_wake

    def take(self, task_id: uuid.UUID, lease_id: uuid.UUID | None) -> BrowserSession | None:
        """Return the task's kept session if it is this lease's and still open (it is no longer kept)."""
        kept = self._kept.get(task_id)
        if kept is None or kept.session.lease_id != lease_id:
            return None
        self._kept.pop(task_id, None)
        kept.timer.cancel()
        browser_pool().wakers.pop(kept.session.lease_id, None)
        return None if kept.session.closed else kept.session

    def holds(self, task_id: uuid.UUID) -> BrowserSession | None:
        """The task's kept session, if it is still open (it stays kept)."""
        kept = self._kept.get(task_id)
        return kept.session if kept is not None and not kept.session.closed else None

    def release(self, task_id: uuid.UUID) -> asyncio.Future[bool] | None:
        """Stop keeping a task's session and close it; the close's future, or None if none was kept."""
        kept = self._kept.pop(task_id, None)
        if kept is None:
            return None
        kept.timer.cancel()
        return kept.session.close()

    def _expire(self, task_id: uuid.UUID, lease_id: uuid.UUID) -> None:
        kept = self._kept.get(task_id)
        if kept is None or kept.session.lease_id != lease_id:
            return
        logger.info("browser task %s: its kept context expired and is closed", task_id)
        self.release(task_id)

    async def shutdown(self) -> None:
        for task_id in list(self._kept):
            closing = self.release(task_id)
            if closing is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(closing), CLOSE_TIMEOUT)
                except Exception:
                    logger.warning("a kept browser context did not close at shutdown", exc_info=True)


_kept: dict[asyncio.AbstractEventLoop, KeptSessions] = {}


def kept_sessions() -> KeptSessions:
    """The kept sessions of the running loop."""
    loop = asyncio.get_running_loop()
    kept = _kept.get(loop)
    if kept is None:
        for old in [other for other in _kept if other.is_closed()]:
            _kept.pop(old, None)
        kept = _kept[loop] = KeptSessions(loop)
    return kept
