"""Running a browser task: its own model loop on a worker's engine loop, driving a browser session.

One attempt claims the task (`lifecycle.browser_task_claim`), gets its browser context, and
then repeats: read the page, ask the task's model (the conversation's current model and
key) for one action, check it, perform it, record it. The loop ends by finishing the task
or by pausing it at a critical point, which releases the attempt (and its worker slot)
while the context is kept here for the owner's answer.

The context: the one this process keeps for the task if it still has it; otherwise the
checkpoint is restored into a new context, but only after the old one is confirmed closed
(its holder closes it on request; a dead holder's is settled by reconciliation). Approvals
are bound to the context they were given in, so after a restore a held action is asked
again. Whether an action is critical is decided by the runtime (`tools.browser_tasks.critical`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from datetime import timedelta
from typing import Any

from django.conf import settings
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from playwright.async_api import Error as PlaywrightError

from conversations.browser_tasks import live_view
from conversations.browser_tasks.lifecycle import (
    CANCELLED_SUMMARY,
    LEASE_RENEW_SECONDS,
    MAX_ACTIONS,
    MAX_RUNNING,
    Pause,
    Progress,
    TaskClaim,
    browser_task_cancel_requested,
    browser_task_claim,
    browser_task_context_set,
    browser_task_finish,
    browser_task_lease_release,
    browser_task_lease_renew,
    browser_task_pause,
    browser_task_step_record,
    browser_task_storage_state,
)
from conversations.browser_tasks.model import SCHEMAS, action_digest, step_request
from conversations.cancel_bus import CancelListener
from conversations.errors import LeaseLost
from conversations.model_settings import TurnModel, turn_model_snapshot
from conversations.models import BrowserTaskStatus, CriticalPointKind
from conversations.providers.base import ModelRequest, StreamEvent, ToolCall
from conversations.providers.catalog import adapter_for
from conversations.providers.errors import ProviderError
from flarebot.core.database import db
from tools.browser_tasks.critical import critical_point_of, go_to_critical
from tools.browser_tasks.guard import SentRequest
from tools.browser_tasks.kept import kept_sessions
from tools.browser_tasks.page import Element, Observation, observation_text
from tools.browser_tasks.session import (
    ACTION_TIMEOUT,
    RUNNING_LEASE,
    ActionFailed,
    BrowserSession,
    session_lease_extend,
    session_open,
)
from tools.web.browser import BrowserUnavailable
from tools.web.leases import browser_lease_state, browser_leases_reconcile, browser_leases_request_close
from tools.web.sources import host_of

logger = logging.getLogger(__name__)

MODEL_ATTEMPTS = 3
NUDGES_MAX = 3  # answers in a row without a tool call before the task fails
OLD_CONTEXT_WAIT = 20.0  # how long a restore waits for the old context's close to be confirmed
RETRY_LATER = timedelta(seconds=15)
CONTEXT_LEASE_RENEW = 30.0
_VALIDATORS = {name: Draft202012Validator(schema) for name, schema in SCHEMAS.items()}
# Runs started here by a wake request, kept referenced until they end.
_woken: set[asyncio.Task[None]] = set()


class Stopped(Exception):
    """The owner cancelled the task while it ran."""


async def browser_task_run(task_id: uuid.UUID, *, cancels: CancelListener) -> None:
    """Claim a task and run it until it ends or pauses; return at once if it is not claimable."""
    claim = await db(browser_task_claim)(task_id=task_id)
    if claim is None:
        return
    cancelled = await cancels.watch(task_id)
    run = TaskRun(claim, cancelled, cancels)
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


def _element_description(name: str, element: Element | None, host: str) -> str:
    label = f"'{element.name}'" if element is not None and element.name else "an element"
    verb = {"click": "Clicking", "type": "Typing into", "select": "Choosing an option of"}[name]
    return f"{verb} {label} on {host}" if host else f"{verb} {label}"


def describe(name: str, data: dict[str, Any], observation: Observation | None) -> str:
    """A step as the owner's card shows it: never typed text."""
    host = host_of(observation.url) if observation is not None else ""
    if name in ("click", "type", "select"):
        element = observation.element(int(data.get("element", 0))) if observation is not None else None
        return _element_description(name, element, host)
    if name == "go_to":
        return f"Opening {host_of(str(data.get('url', '')))}"
    if name == "scroll":
        return f"Scrolling {data.get('direction', 'down')} on {host}" if host else "Scrolling"
    if name == "wait":
        return f"Waiting {data.get('seconds', 1)} s"
    return "Waiting for your answer"


class TaskRun:
    """One attempt of a task, from its claim until it ends, pauses or loses its lease."""

    def __init__(self, claim: TaskClaim, cancelled: asyncio.Event, cancels: CancelListener) -> None:
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

    # --- bookkeeping -------------------------------------------------------------------

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

    # --- the run -----------------------------------------------------------------------

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
        try:
            await asyncio.wait_for(self.session.go_to(target), ACTION_TIMEOUT + 5)
        except (ActionFailed, TimeoutError, PlaywrightError) as failed:
            message = failed.message if isinstance(failed, ActionFailed) else "the page did not load in time."
            if not restoring:
                await self.end(BrowserTaskStatus.FAILED, f"The start page could not be opened: {message}")
                return False
            self.notes.append(f"Reopening the last page failed: {message}")
        if restoring:
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
        adapter = adapter_for(model.provider)
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

    # --- actions -----------------------------------------------------------------------

    def _step(self, call: ToolCall) -> dict[str, Any]:
        return {"id": f"step-{len(self.steps) + 1}", "name": call.name, "input": call.input, "result": None}

    async def act(self, call: ToolCall, observation: Observation | None, authorization: dict[str, Any] | None) -> bool:
        step = self._step(call)
        validator = _VALIDATORS.get(call.name)
        if validator is None:
            return await self._refuse(step, f"There is no tool named {call.name[:60]!r}.")
        error = best_match(validator.iter_errors(call.input))
        if error is not None:
            return await self._refuse(step, f"Invalid input at {error.json_path}: {error.message}"[:500])
        data = call.input
        if call.name == "finish":
            step["result"] = {"ok": True}
            self.steps.append(step)
            status = BrowserTaskStatus.COMPLETED if data["outcome"] == "completed" else BrowserTaskStatus.FAILED
            await self.end(status, data["summary"])
            return True
        if call.name == "ask_owner":
            return await self.pause(step, Pause(CriticalPointKind.QUESTION, data["question"]))
        if call.name == "request_sign_in":
            return await self.pause(step, Pause(CriticalPointKind.SIGN_IN, data["reason"]))
        if call.name == "request_email_consent":
            return await self.ask_consent(step, data, observation)
        element: Element | None = None
        reason: str | None = None
        if call.name in ("click", "type", "select"):
            element = observation.element(data["element"]) if observation is not None else None
            if element is None:
                return await self._refuse(step, f"There is no element {data['element']} on the current page.")
            reason = critical_point_of(call.name, element.as_dict())
        elif call.name == "go_to":
            reason = go_to_critical(data["url"])
        page_url = observation.url if observation is not None else self.url
        digest = action_digest(
            name=call.name, data=data, element=element.as_dict() if element is not None else {}, url=page_url
        )
        grant = self._granted(authorization, data.get("critical_point_id"), digest)
        if reason is not None and grant is None:
            return await self.hold(step, observation, element, reason, digest)
        return await self.perform(step, observation, grant=grant, digest=digest)

    async def ask_consent(self, step: dict[str, Any], data: dict[str, Any], observation: Observation | None) -> bool:
        """Ask for consent to send; bound to one click when the model names the control that sends."""
        number = data.get("element")
        if number is None:
            return await self.pause(step, Pause(CriticalPointKind.EMAIL_CONSENT, data["question"]))
        element = observation.element(number) if observation is not None else None
        if element is None or observation is None:
            return await self._refuse(step, f"There is no element {number} on the current page.")
        click = {"element": number}
        digest = action_digest(name="click", data=click, element=element.as_dict(), url=observation.url)
        action = {"name": "click", "element": number, "description": describe("click", click, observation)}
        return await self.pause(step, Pause(CriticalPointKind.EMAIL_CONSENT, data["question"], action, digest))

    def _granted(self, authorization: dict[str, Any] | None, given: Any, digest: str) -> dict[str, Any] | None:
        """The owner's grant for exactly this action, in this context, now; None when there is none."""
        if authorization is None or self.session is None or not isinstance(given, str):
            return None
        if authorization.get("critical_point_id") != given.lower():
            return None
        if authorization.get("lease_id") != str(self.session.lease_id):
            return None  # given in another context: a restore asks again
        return authorization if authorization.get("digest") == digest else None

    async def _refuse(self, step: dict[str, Any], message: str) -> bool:
        step["result"] = {"ok": False, "error": "refused", "message": message}
        self.steps.append(step)
        self.actions += 1
        await self.record()
        return False

    async def perform(
        self,
        step: dict[str, Any],
        observation: Observation | None,
        *,
        grant: dict[str, Any] | None = None,
        digest: str = "",
    ) -> bool:
        assert self.session is not None
        description = describe(step["name"], step["input"], observation)
        self.steps.append(step)
        self.actions += 1
        # Recorded before it is done: a crash in between never repeats it (it becomes "interrupted").
        await self.record(card=description)
        if self.cancelled.is_set():
            raise Stopped
        guard = self.session.guard
        guard.act(
            page_url=observation.url if observation is not None else self.url,
            allowed=(grant or {}).get("requests", ()),
            allow_site=bool((grant or {}).get("by_name")),
        )
        try:
            action = asyncio.ensure_future(self._do(step["name"], step["input"]))
            cancel_wait = asyncio.ensure_future(self.cancelled.wait())
            try:
                await asyncio.wait(
                    {action, cancel_wait}, timeout=ACTION_TIMEOUT + 5, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                cancel_wait.cancel()
            if not action.done():
                action.cancel()
                with suppress(BaseException):
                    await action
        finally:
            effects = guard.rest()
        result = self._result_of(action)
        if effects.refused:
            result["refused"] = [sent.described() for sent in effects.refused]
            result["refused_note"] = "Requests that change state on other sites are never sent while a task acts."
        with suppress(Exception):
            self.url = self.session.page.url
        if self.cancelled.is_set():
            step["result"] = result
            await self.record()
            raise Stopped
        if effects.held:
            return await self.hold_sent(step, observation, effects.held, digest)
        step["result"] = result
        await self.record()
        return False

    def _result_of(self, action: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        if action.cancelled():
            if self.cancelled.is_set():
                return {"ok": False, "error": "cancelled", "message": "Stopped by the owner during this action."}
            return {
                "ok": False,
                "error": "action_failed",
                "message": f"The action did not finish within {ACTION_TIMEOUT:g} s.",
            }
        error = action.exception()
        if isinstance(error, ActionFailed):
            return {"ok": False, "error": "action_failed", "message": error.message}
        if error is not None:
            if not isinstance(error, PlaywrightError | TimeoutError):
                raise error
            return {"ok": False, "error": "action_failed", "message": "The browser could not do this action."}
        return action.result()

    async def _do(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        assert self.session is not None
        session = self.session
        if name == "go_to":
            await session.go_to(data["url"])
        elif name == "click":
            await session.click(data["element"])
        elif name == "type":
            await session.type(data["element"], data["text"])
        elif name == "select":
            chosen = await session.select(data["element"], data["option"])
            return {"ok": True, "chosen": chosen}
        elif name == "scroll":
            await session.scroll(data["direction"])
        elif name == "wait":
            await asyncio.sleep(int(data["seconds"]))
        return {"ok": True}

    async def hold(
        self, step: dict[str, Any], observation: Observation | None, element: Element | None, reason: str, digest: str
    ) -> bool:
        """Pause before an action that is critical by its name, holding exactly it for the owner's decision."""
        description = describe(step["name"], step["input"], observation)
        question = f"{description} {reason}. Approve to let Flarebot do exactly this, once; Deny to stop it."
        action: dict[str, Any] = {"name": step["name"], "description": description}
        if element is not None:
            action["element"] = element.number
        return await self.pause(step, Pause(CriticalPointKind.CONFIRM, question, action, digest))

    async def hold_sent(
        self, step: dict[str, Any], observation: Observation | None, held: list[SentRequest], digest: str
    ) -> bool:
        """Pause after an action whose state-changing requests were held, asking about exactly them."""
        description = describe(step["name"], step["input"], observation)
        sent = "; ".join(request.described() for request in held)
        question = (
            f"{description} tried to send: {sent}. Nothing was sent. Approve to let exactly this through when "
            "Flarebot repeats the action, once; Deny to stop it."
        )
        action = {
            "name": step["name"],
            "description": description,
            "requests": [request.as_dict() for request in held],
        }
        if step["name"] in ("click", "type", "select"):
            action["element"] = step["input"]["element"]
        return await self.pause(step, Pause(CriticalPointKind.CONFIRM, question, action, digest), recorded=True)

    async def pause(self, step: dict[str, Any], pause: Pause, *, recorded: bool = False) -> bool:
        """Persist the checkpoint and the question, keep the context here, and let the worker slot go.

        `recorded`: the step is among the steps already (an action performed, whose
        requests were held); its result is the owner's answer.
        """
        assert self.session is not None
        point_id = uuid.uuid4()
        step["critical_point_id"] = str(point_id)
        step["result"] = None
        if not recorded:
            self.steps.append(step)
        session = self.session
        storage: dict[str, Any] | None
        try:
            storage = await asyncio.wait_for(session.storage_state(), ACTION_TIMEOUT)
            self.url = session.page.url
        except (TimeoutError, PlaywrightError):
            storage = None
        await db(browser_task_pause)(
            task_id=self.task_id,
            lease_token=self.claim.lease_token,
            progress=self.progress(),
            pause=pause,
            point_id=point_id,
            storage_state=storage,
        )
        self.session = None  # kept for the answer; no longer this attempt's
        await kept_sessions().keep(session, on_wake=waker(self.task_id, self.cancels))
        if pause.kind == CriticalPointKind.SIGN_IN:
            session.guard.owner_acts()  # the owner's own sign-in sends what it sends
            live_view.live_view_start(session, conversation_id=self.claim.conversation_id, critical_point_id=point_id)
        return True
