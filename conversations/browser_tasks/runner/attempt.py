"""One attempt of a task: what it did so far, the checkpoint it writes after each step, its heartbeat, its end.

Every write names the attempt's lease token; the heartbeat renews the lease (and the
context's) and notices a cancel the bus may have missed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import suppress

from conversations.browser_tasks.lifecycle import (
    LEASE_RENEW_SECONDS,
    Progress,
    TaskClaim,
    browser_task_cancel_requested,
    browser_task_finish,
    browser_task_lease_renew,
    browser_task_step_record,
)
from conversations.cancel_bus import CancelListener
from flarebot.core.database import db
from tools.browser_tasks.session import RUNNING_LEASE, BrowserSession, session_lease_extend
from tools.web.leases import browser_leases_request_close

CONTEXT_LEASE_RENEW = 30.0


class Stopped(Exception):
    """The owner cancelled the task while it ran."""


class Attempt:
    """The state of an attempt and what it writes as it goes."""

    def __init__(
        self, claim: TaskClaim, cancelled: asyncio.Event, cancels: CancelListener, *, on_wake: Callable[[], None]
    ) -> None:
        self.claim = claim
        self.task_id = claim.task_id
        self.cancelled = cancelled
        self.cancels = cancels
        self.steps = list(claim.steps)
        self.actions = claim.actions
        self.authorization = claim.authorization
        self.url = claim.current_url
        self.started = time.monotonic()
        self.session: BrowserSession | None = None
        self.notes: list[str] = []
        self.nudges = 0
        # What a wake request of the context kept at a pause runs (`loop.waker`).
        self.on_wake = on_wake

    def running_ms(self) -> int:
        return self.claim.running_ms + int((time.monotonic() - self.started) * 1000)

    def progress(self) -> Progress:
        return Progress(list(self.steps), self.actions, self.running_ms(), self.url, self.authorization)

    async def record(self, card: str | None = None) -> None:
        await db(browser_task_step_record)(
            task_id=self.task_id, lease_token=self.claim.lease_token, progress=self.progress(), card=card
        )

    async def heartbeat(self) -> None:
        """Renew the task's lease and its context's; notice a cancel the bus may have missed."""
        last_context = time.monotonic()
        while True:
            await asyncio.sleep(LEASE_RENEW_SECONDS)
            if not await db(browser_task_lease_renew)(task_id=self.task_id, lease_token=self.claim.lease_token):
                return
            if await db(browser_task_cancel_requested)(task_id=self.task_id):
                self.cancelled.set()
            if self.session is not None and time.monotonic() - last_context > CONTEXT_LEASE_RENEW:
                last_context = time.monotonic()
                with suppress(Exception):
                    await session_lease_extend(self.session, seconds=RUNNING_LEASE.total_seconds())

    async def end(self, status: str, summary: str) -> None:
        """Record the outcome (then its projection and the context's release), then close the context."""
        await db(browser_task_finish)(
            task_id=self.task_id, lease_token=self.claim.lease_token, status=status, summary=summary
        )
        await self.close_session()

    async def close_session(self) -> None:
        session, self.session = self.session, None
        if session is not None and not await asyncio.shield(session.close()):
            await db(browser_leases_request_close)(lease_id=session.lease_id)  # the cleanup sweep retries it
