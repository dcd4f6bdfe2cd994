"""The attempt's loop: claim the task, get its context (kept here, restored, or new), then step until it ends.

Each step reads the page, asks the task's model for one action and acts on it
(`actions.py`); the loop ends when the task ends, pauses or loses its lease.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from datetime import timedelta

from django.conf import settings

from conversations.browser_tasks import live_view
from conversations.browser_tasks.lifecycle import (
    CANCELLED_SUMMARY,
    MAX_ACTIONS,
    MAX_RUNNING,
    browser_task_cancel_requested,
    browser_task_claim,
    browser_task_context_set,
    browser_task_lease_release,
    browser_task_storage_state,
)
from conversations.browser_tasks.model import step_request
from conversations.browser_tasks.runner.actions import Acting
from conversations.browser_tasks.runner.attempt import Stopped
from conversations.cancel_bus import CancelListener
from conversations.errors import LeaseLost
from conversations.model_settings import TurnModel, turn_model_snapshot
from conversations.models import BrowserTaskStatus
from conversations.providers.base import ModelRequest, StreamEvent, ToolCall
from conversations.providers.catalog import adapter_loaded
from conversations.providers.errors import ProviderError
from flarebot.core.database import db
from tools.browser_tasks.critical import address_meaning
from tools.browser_tasks.kept import kept_sessions
from tools.browser_tasks.page import Observation, observation_text
from tools.browser_tasks.session import ACTION_TIMEOUT, ActionFailed, session_open
from tools.web.browser import BrowserUnavailable
from tools.web.leases import browser_lease_state, browser_leases_reconcile, browser_leases_request_close

logger = logging.getLogger(__name__)

MODEL_ATTEMPTS = 3
NUDGES_MAX = 3  # answers in a row without a tool call before the task fails
OLD_CONTEXT_WAIT = 20.0  # how long a restore waits for the old context's close to be confirmed
RETRY_LATER = timedelta(seconds=15)
CONTINUED_NOTE = (
    "This task replaces an earlier task the owner corrected while it waited. The browser continues where that task "
    "stopped: the same address and cookies, not every detail of the page (check what is already done, such as a "
    "filled cart). Nothing the owner approved for the earlier task applies here."
)
# Runs started here by a wake request, kept referenced until they end.
_woken: set[asyncio.Task[None]] = set()


async def browser_task_run(task_id: uuid.UUID, *, cancels: CancelListener) -> None:
    """Claim a task and run it until it ends or pauses; return at once if it is not claimable."""
    claim = await db(browser_task_claim)(task_id=task_id)
    if claim is None:
        return
    cancelled = await cancels.watch(task_id)
    run = TaskRun(claim, cancelled, cancels, on_wake=waker(task_id, cancels))
    heartbeat = asyncio.get_running_loop().create_task(run.heartbeat())
    try:
        await run.run()
    except LeaseLost:
        logger.info("browser task %s: lease lost, another attempt owns it", task_id)
        await run.close_session()
    except Exception:
        logger.exception("browser task %s failed unexpectedly", task_id)
        await run.end(BrowserTaskStatus.FAILED, "The browser task failed unexpectedly.")
    finally:
        heartbeat.cancel()
        cancels.forget(task_id)


def waker(task_id: uuid.UUID, cancels: CancelListener) -> Callable[[], None]:
    """What a kept context's wake request runs: the task, here, on this loop."""

    def wake() -> None:
        task = asyncio.get_running_loop().create_task(browser_task_run(task_id, cancels=cancels))
        _woken.add(task)
        task.add_done_callback(_woken.discard)

    return wake


class TaskRun(Acting):
    """One attempt of a task, from its claim until it ends, pauses or loses its lease."""

    async def run(self) -> None:
        if self.claim.cancel_requested or self.cancelled.is_set():
            await self.end(BrowserTaskStatus.CANCELLED, CANCELLED_SUMMARY)
            return
        model = await db(turn_model_snapshot)()
        if model.problem is not None:
            await self.end(BrowserTaskStatus.FAILED, model.problem[1])
            return
        if not await self.acquire():
            return
        try:
            while not await self.step(model):
                pass
        except Stopped:
            await self.end(BrowserTaskStatus.CANCELLED, CANCELLED_SUMMARY)

    async def acquire(self) -> bool:
        """Get the task's context: the one kept here, else a restore (or the first start); False to stop."""
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        live_view.live_view_stop(self.task_id)
        kept = kept_sessions().take(self.task_id, self.claim.context_lease_id)
        if kept is not None:
            kept.guard.rest()  # the owner's sign-in, if any, is over: the task acts again
            self.session = kept
            return True
        old = self.claim.context_lease_id
        if old is not None and not await self._closed(old):
            logger.info("browser task %s: its old context is not confirmed closed yet; retrying later", self.task_id)
            await db(browser_task_lease_release)(
                task_id=self.task_id, lease_token=self.claim.lease_token, retry_in=RETRY_LATER
            )
            return False
        restoring = bool(self.claim.current_url)
        storage = await db(browser_task_storage_state)(task_id=self.task_id) if restoring else None
        try:
            self.session = await session_open(
                task_id=self.task_id, conversation_id=self.claim.conversation_id, storage_state=storage
            )
        except BrowserUnavailable as unavailable:
            await self.end(BrowserTaskStatus.FAILED, str(unavailable))
            return False
        await db(browser_task_context_set)(
            task_id=self.task_id, lease_token=self.claim.lease_token, context_lease_id=self.session.lease_id
        )
        target = self.claim.current_url or self.claim.start_url
        meaning = address_meaning(target)
        if target == self.claim.start_url:
            self.session.guard.opening(target)  # the owner started the task on it, whatever it reads as
        if target != self.claim.start_url and meaning is not None:
            # Opening it again could repeat what it did (a GET that bought): the model goes on from no page.
            self.notes.append(
                f"The last page was not reopened: its address reads as {meaning}, and opening it again could "
                "repeat what it did. Open the page you need with go_to."
            )
        else:
            try:
                await asyncio.wait_for(self.session.go_to(target), ACTION_TIMEOUT + 5)
            except (ActionFailed, TimeoutError, PlaywrightError) as failed:
                message = failed.message if isinstance(failed, ActionFailed) else "the page did not load in time."
                if not restoring:
                    await self.end(BrowserTaskStatus.FAILED, f"The start page could not be opened: {message}")
                    return False
                self.notes.append(f"Reopening the last page failed: {message}")
        if restoring and not self.steps:
            # A page without steps of its own: this task corrects a paused one and continues there.
            self.notes.append(CONTINUED_NOTE)
        elif restoring:
            self.notes.append(
                "The browser was restored from the task's checkpoint: the same address and cookies, not every "
                "detail of the page. Approvals given before no longer apply: a held action is asked again."
            )
        return True

    async def _closed(self, lease_id: uuid.UUID) -> bool:
        """Ask for an old context's close and wait until it is confirmed (or its holder is gone)."""
        await db(browser_leases_request_close)(lease_id=lease_id)
        give_up = time.monotonic() + OLD_CONTEXT_WAIT
        while time.monotonic() < give_up:
            state = await db(browser_lease_state)(lease_id=lease_id)
            if state in (None, "closed"):
                return True
            if state != "open":
                return False  # its cleanup failed: it can never be confirmed closed
            await db(browser_leases_reconcile)()
            await asyncio.sleep(0.25)
        return False

    async def _observe(self) -> Observation | None:
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        assert self.session is not None
        try:
            observation = await asyncio.wait_for(self.session.observe(), ACTION_TIMEOUT)
        except (ActionFailed, TimeoutError, PlaywrightError):
            return None
        self.url = observation.url
        return observation

    async def step(self, model: TurnModel) -> bool:
        """Do one step; True when the attempt is over (the task ended or paused)."""
        assert self.session is not None
        if self.cancelled.is_set():
            raise Stopped
        if self.session.closed:
            if await db(browser_task_cancel_requested)(task_id=self.task_id):
                raise Stopped
            await self.end(BrowserTaskStatus.FAILED, "The task's browser was closed.")
            return True
        if self.actions >= MAX_ACTIONS:
            await self.end(BrowserTaskStatus.FAILED, f"The task was stopped after {MAX_ACTIONS} actions.")
            return True
        if self.running_ms() >= MAX_RUNNING.total_seconds() * 1000:
            minutes = int(MAX_RUNNING.total_seconds() // 60)
            await self.end(BrowserTaskStatus.FAILED, f"The task was stopped after {minutes} minutes of running.")
            return True
        observation = await self._observe()
        self.notes += [
            f"While no action ran, the page tried to send {sent.described()}; it was refused."
            for sent in self.session.guard.outside_taken()
        ]
        page = observation_text(observation) if observation is not None else "The page could not be read."
        request = step_request(
            goal=self.claim.goal,
            start_url=self.claim.start_url,
            restrictions=self.claim.restrictions,
            steps=self.steps,
            page=page,
            notes=self.notes,
        )
        try:
            calls = await self.decide(model, request)
        except ProviderError as error:
            await self.end(BrowserTaskStatus.FAILED, error.message)
            return True
        self.notes = []
        authorization, self.authorization = self.authorization, None  # good for this step only
        if not calls:
            self.nudges += 1
            if self.nudges >= NUDGES_MAX:
                await self.end(BrowserTaskStatus.FAILED, "The task's model did not choose an action.")
                return True
            self.notes.append("Your last answer called no tool. Call exactly one tool.")
            return False
        self.nudges = 0
        if len(calls) > 1:
            self.notes.append("Only your first tool call was used: make exactly one call per step.")
        return await self.act(calls[0], observation, authorization)

    async def decide(self, model: TurnModel, request: ModelRequest) -> list[ToolCall]:
        adapter = await adapter_loaded(model.provider)
        for attempt in range(MODEL_ATTEMPTS):
            try:
                return await self._consume(adapter.stream(request, model=model.model, key=model.key))
            except ProviderError as error:
                if not error.retryable or attempt == MODEL_ATTEMPTS - 1:
                    raise
            await asyncio.sleep(1.0 + attempt)
        return []

    async def _consume(self, stream: AsyncIterator[StreamEvent]) -> list[ToolCall]:
        calls: list[ToolCall] = []
        idle = settings.CONFIG.stream_idle_timeout
        cancel_wait = asyncio.ensure_future(self.cancelled.wait())
        try:
            while True:
                next_event = asyncio.ensure_future(anext(stream))
                done, _ = await asyncio.wait(
                    {next_event, cancel_wait}, timeout=idle, return_when=asyncio.FIRST_COMPLETED
                )
                if cancel_wait in done:
                    next_event.cancel()
                    raise Stopped
                if next_event not in done:
                    next_event.cancel()
                    raise ProviderError("model_stalled", "The model stopped responding.", retryable=True)
                try:
                    event = next_event.result()
                except StopAsyncIteration:
                    return calls
                if isinstance(event, ToolCall):
                    calls.append(event)
        finally:
            cancel_wait.cancel()
            with suppress(Exception):
                await stream.aclose()  # type: ignore[attr-defined]
