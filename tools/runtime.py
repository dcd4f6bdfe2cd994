"""Running one tool call under its declaration (`tools.registry.Tool`), whatever the tool does.

The engine hands every call here; the rules of the contract live in this module only:
input checked against the schema, availability asked once per turn, a place taken under
the tool's concurrency limit, the deadline with its grace and cleanup, the output bound,
and `{"ok": false}` results counted as failures. A result that arrives after the call was
cancelled or timed out is discarded (or, for a tool that `keeps_partial`, kept beside the
outcome as `partial`): a call's outcome is decided once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from jsonschema.exceptions import best_match

from flarebot.core.database import db
from tools.models import ActivityStatus
from tools.output import json_size, output_bound
from tools.registry import GRACE, CleanupRequest, Place, Tool, ToolContext, ToolFailed
from tools.slots import SlotHeld, slot_release, slot_wait

logger = logging.getLogger(__name__)

AVAILABILITY_TIMEOUT = 5.0
MESSAGE_MAX = 500
# A place outlives its holder's longest possible run by this much before others take it.
SLOT_MARGIN = timedelta(seconds=30)

CANCELLED_MESSAGE = "The owner stopped this turn."

# Tasks of calls that ignored their cancellation; kept referenced until they end.
_abandoned: set[asyncio.Task[Any]] = set()


@dataclass(frozen=True)
class CallResult:
    status: str  # succeeded | failed | cancelled | unavailable
    output: Any
    # Why the call did not succeed, for its activity card: words the engine (or ToolFailed)
    # chose, which never quote the call's input.
    message: str | None = None


def failed_call(status: str, code: str, message: str, *, card: str | None = None) -> CallResult:
    """The result of a call that did not succeed for a reason the engine states (bounded).

    `message` goes to the model; the card shows `card` instead when the message may quote
    what the model sent (which a card must never show).
    """
    message = message[:MESSAGE_MAX]
    return CallResult(status, {"error": code, "message": message}, card or message)


class CallWatch:
    """The latest moment each running call of a turn may still be awaited.

    The turn's heartbeat asks `overdue()`: a call past its deadline plus grace means the
    engine is stuck on it, and the lease is then left to expire so that recovery takes over.
    """

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def begin(self, call_id: str, seconds: float) -> None:
        self._until[call_id] = time.monotonic() + seconds

    def end(self, call_id: str) -> None:
        self._until.pop(call_id, None)

    def overdue(self) -> bool:
        now = time.monotonic()
        return any(until < now for until in self._until.values())


class Availability:
    """Answers of the tools' availability checks, each asked at most once per turn attempt."""

    def __init__(self) -> None:
        self._answers: dict[str, asyncio.Future[str | None]] = {}

    async def problem(self, tool: Tool, context: ToolContext) -> str | None:
        """Return what the owner must configure for this tool, or None when it can run."""
        if tool.available is None:
            return None
        answer = self._answers.get(tool.name)
        if answer is None:
            answer = self._answers[tool.name] = asyncio.ensure_future(_ask(tool, context))
        return await asyncio.shield(answer)


async def _ask(tool: Tool, context: ToolContext) -> str | None:
    assert tool.available is not None
    label = tool.label or tool.name
    try:
        answer = await asyncio.wait_for(tool.available(context), AVAILABILITY_TIMEOUT)
    except TimeoutError:
        return f"{label} could not be checked in time. Try again in a moment."
    except Exception:
        logger.exception("availability check of tool %s raised", tool.name)
        return f"{label} could not be checked. Try again in a moment."
    return str(answer)[:MESSAGE_MAX] if answer else None


def input_problem(tool: Tool, data: Any) -> str | None:
    """Return why input does not match the tool's schema (safe for the model), or None."""
    if not isinstance(data, dict):
        return f"Invalid input for {tool.name}: the input must be a JSON object."
    error = best_match(tool.validator.iter_errors(data))
    if error is None:
        return None
    return f"Invalid input for {tool.name} at {error.json_path}: {error.message}"[:MESSAGE_MAX]


async def tool_call_execute(
    tool: Tool,
    context: ToolContext,
    data: Any,
    *,
    availability: Availability,
    watch: CallWatch,
    on_running: Callable[[], Awaitable[None]],
) -> CallResult:
    """Run one call under its tool's contract and return its outcome.

    `on_running` is awaited once the call really starts (after a free place was found).
    """
    problem = input_problem(tool, data)
    if problem is not None:
        card = f"{tool.label or tool.name} was given input it does not accept; the model was told why."
        return failed_call(ActivityStatus.FAILED, "invalid_input", problem, card=card)
    unavailable = await availability.problem(tool, context)
    if unavailable is not None:
        return failed_call(ActivityStatus.UNAVAILABLE, "unavailable", unavailable)
    try:
        if tool.concurrency is not None:
            watch.begin(context.tool_call_id, tool.deadline + GRACE)
            taken = await _place(tool, context)
            if isinstance(taken, CallResult):
                return taken
            context = replace(context, place=Place(taken))
        watch.begin(context.tool_call_id, tool.deadline + GRACE)
        await on_running()
        return await _run_bounded(tool, context, data)
    finally:
        watch.end(context.tool_call_id)


async def _place(tool: Tool, context: ToolContext) -> SlotHeld | CallResult:
    """Take a free place: wait for one (at most the tool's deadline, unless the turn is cancelled
    first), or fail at once when the tool says so."""
    assert tool.concurrency is not None
    hold_for = timedelta(seconds=tool.deadline + GRACE) + SLOT_MARGIN
    wait_at_most = tool.deadline if tool.concurrency_wait else 0.0
    waiting = asyncio.ensure_future(
        slot_wait(tool=tool.name, limit=tool.concurrency, hold_for=hold_for, wait_at_most=wait_at_most)
    )
    cancel_wait = asyncio.ensure_future(context.cancelled.wait())
    try:
        await asyncio.wait({waiting, cancel_wait}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        cancel_wait.cancel()
    if not waiting.done():
        waiting.cancel()
        waiting.add_done_callback(_release_if_taken)
        return failed_call(ActivityStatus.CANCELLED, "cancelled", CANCELLED_MESSAGE)
    held = waiting.result()
    if held is None:
        label = tool.label or tool.name
        message = f"{label} is busy: {tool.concurrency} calls already run at once. It was not run; try again later."
        return failed_call(ActivityStatus.FAILED, "busy", message)
    return held


def _release_if_taken(waiting: asyncio.Future[SlotHeld | None]) -> None:
    if not waiting.cancelled() and waiting.exception() is None and (held := waiting.result()) is not None:
        _spawn(db(slot_release)(held=held))


def _spawn(coroutine: Awaitable[Any]) -> None:
    task = asyncio.ensure_future(coroutine)
    _abandoned.add(task)
    task.add_done_callback(_abandoned.discard)


async def _run_bounded(tool: Tool, context: ToolContext, data: dict[str, Any]) -> CallResult:
    task = asyncio.ensure_future(tool.run(context, data))
    place = context.place
    if place is not None:
        # The place is given back when the work has really stopped, even if that is
        # after the engine stopped waiting for it (unless the tool kept it).
        task.add_done_callback(lambda _: None if place.kept else _spawn(db(slot_release)(held=place.held)))
    cancel_wait = asyncio.ensure_future(context.cancelled.wait())
    try:
        await asyncio.wait({task, cancel_wait}, timeout=tool.deadline, return_when=asyncio.FIRST_COMPLETED)
    finally:
        cancel_wait.cancel()
    if task.done():
        return _outcome(tool, task)
    reason = "cancelled" if context.cancelled.is_set() else "timeout"
    await _stop(tool, context, task, reason)
    if reason == "cancelled":
        stopped = failed_call(ActivityStatus.CANCELLED, "cancelled", CANCELLED_MESSAGE)
    else:
        label = tool.label or tool.name
        message = f"{label} did not finish within {tool.deadline:g} s and was stopped."
        stopped = failed_call(ActivityStatus.FAILED, "timeout", message)
    return _with_partial(tool, task, stopped)


def _with_partial(tool: Tool, task: asyncio.Future[Any], stopped: CallResult) -> CallResult:
    """Keep what a stopped call handed back within its grace as `partial`, if its tool asks for that.

    The outcome stays the engine's (cancelled or timed out); the value only travels beside it.
    """
    if not tool.keeps_partial or not task.done() or task.cancelled() or task.exception() is not None:
        return stopped
    partial = task.result()
    if not isinstance(partial, dict):
        return stopped
    try:
        json_size(partial)
    except (TypeError, ValueError):
        return stopped
    output = output_bound({**stopped.output, "partial": partial}, limit=tool.output_limit)
    return CallResult(stopped.status, output, stopped.message)


async def _stop(tool: Tool, context: ToolContext, task: asyncio.Future[Any], reason: str) -> None:
    """Cancel a call and give it GRACE seconds, its cleanup hook running meanwhile."""
    task.cancel()
    waiting: set[asyncio.Future[Any]] = {task}
    cleanup: asyncio.Future[None] | None = None
    if tool.cleanup is not None:
        request = CleanupRequest(context.conversation_id, context.turn_id, context.tool_call_id, reason)  # type: ignore[arg-type]
        cleanup = asyncio.ensure_future(tool.cleanup(request))
        waiting.add(cleanup)
    _, still = await asyncio.wait(waiting, timeout=GRACE)
    if task in still:
        logger.warning("tool %s ignored its cancellation for %g s; no longer waiting for it", tool.name, GRACE)
        _abandoned.add(task)  # type: ignore[arg-type]
        task.add_done_callback(_abandoned.discard)
    if cleanup is not None:
        if cleanup in still:
            logger.warning("cleanup of tool %s took longer than %g s; stopped", tool.name, GRACE)
            cleanup.cancel()
        elif not cleanup.cancelled() and cleanup.exception() is not None:
            logger.error("cleanup of tool %s failed", tool.name, exc_info=cleanup.exception())
    # What the call may still return is discarded: its outcome is decided here.
    task.add_done_callback(_drop_late_result)


def _drop_late_result(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.info("a stopped tool call raised after it was stopped", exc_info=task.exception())


def _outcome(tool: Tool, task: asyncio.Future[Any]) -> CallResult:
    try:
        output = task.result()
    except ToolFailed as failed:
        return failed_call(ActivityStatus.FAILED, "tool_failed", failed.message)
    except (Exception, asyncio.CancelledError):
        logger.exception("tool %s raised", tool.name)
        return failed_call(ActivityStatus.FAILED, "tool_failed", "The tool failed unexpectedly.")
    try:
        json_size(output)
    except (TypeError, ValueError):
        logger.error("tool %s returned a value that is not JSON", tool.name)
        return failed_call(ActivityStatus.FAILED, "tool_failed", "The tool returned a result that is not JSON.")
    output = output_bound(output, limit=tool.output_limit)
    semantic_failure = isinstance(output, dict) and output.get("ok") is False
    return CallResult(ActivityStatus.FAILED if semantic_failure else ActivityStatus.SUCCEEDED, output)
