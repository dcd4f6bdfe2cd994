"""Running the tool calls a model step asked for, in parallel, with their parts, cards and events.

What a call may do is decided by `tools.runtime` (schema, availability, concurrency,
deadline, output bound); this module records it: the call's tool part in the answer,
its activity card (pending, running, then one final status) and the events announcing
each change, and the coalescing of its progress reports.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from conversations.engine.writer import TranscriptWriter
from conversations.events import NewEvent, activity_events, tool_finished, tool_progress, tool_started
from conversations.model_settings import provider_key_read
from conversations.providers.base import ToolCall, engine_call_id
from conversations.selectors import conversation_is_active
from conversations.turns import Claim
from conversations.write_proposals import conversation_has_read_untrusted, conversation_untrusted_mark
from flarebot.core.crypto import Secret
from flarebot.core.database import db
from tools.activity import (
    Activity,
    activities_reopen,
    activity_announced,
    activity_begin,
    activity_finish,
    activity_hint,
    activity_progress,
    activity_running,
)
from tools.models import ActivityStatus
from tools.registry import KeyMissing, ToolContext, reads_untrusted, tool_get
from tools.runtime import Availability, CallResult, CallWatch, failed_call, tool_call_execute

PROGRESS_INTERVAL = 0.25  # at most four progress writes a second per call


async def _provider_key(provider: str) -> Secret | KeyMissing:
    return await db(provider_key_read)(provider=provider)


@dataclass
class TurnTools:
    """What the tool calls of one turn attempt share."""

    availability: Availability = field(default_factory=Availability)
    watch: CallWatch = field(default_factory=CallWatch)
    provider_key: Callable[[str], Awaitable[Secret | KeyMissing]] = _provider_key


async def run_tool_calls(
    claim: Claim,
    writer: TranscriptWriter,
    step: int,
    calls: list[ToolCall],
    offered: set[str],
    cancelled: asyncio.Event,
    turn_tools: TurnTools,
) -> None:
    """Record the calls as tool parts, run them together, and record each result.

    Each call gets the engine's identity here (`engine_call_id`); the provider's id is kept
    in its part only to answer the provider. When one of them reads untrusted content, the
    conversation is marked as having read it before any of them runs.
    """
    calls = [replace(call, id=engine_call_id(claim.turn_id, step, index)) for index, call in enumerate(calls)]
    for call in calls:
        writer.parts.append(
            {
                "type": "tool",
                "tool_call_id": call.id,
                "provider_call_id": call.provider_id,
                "name": call.name,
                "input": call.input,
                "output": None,
                "step": step,
            }
        )
    if reads_untrusted(call.name for call in calls if call.name in offered):
        await db(conversation_untrusted_mark)(conversation_id=claim.conversation_id)
    activities = [
        activity_begin(conversation_id=claim.conversation_id, turn_id=claim.turn_id, tool_call_id=c.id, name=c.name)
        for c in calls
    ]
    events: list[NewEvent] = []
    for call, activity in zip(calls, activities, strict=True):
        started = tool_started(claim.turn_id, tool_call_id=call.id, name=call.name, input=call.input)
        events += [started, *_activity_event(claim, activity)]
    await writer.record(events, tuple(activities))
    await _run_all(claim, writer, calls, activities, offered, cancelled, turn_tools)


async def rerun_tool_calls(
    claim: Claim, writer: TranscriptWriter, calls: list[ToolCall], cancelled: asyncio.Event, turn_tools: TurnTools
) -> None:
    """Run again the `read` calls a crash cut off; their parts are in the answer already."""
    names = {call.id: call.name for call in calls}
    activities = await db(activities_reopen)(conversation_id=claim.conversation_id, turn_id=claim.turn_id, calls=names)
    by_id = {activity.tool_call_id: activity for activity in activities}
    calls = [call for call in calls if call.id in by_id]
    if not calls:
        return
    activities = [by_id[call.id] for call in calls]
    if reads_untrusted(call.name for call in calls):
        await db(conversation_untrusted_mark)(conversation_id=claim.conversation_id)
    await writer.record([e for a in activities for e in _activity_event(claim, a)], tuple(activities))
    await _run_all(claim, writer, calls, activities, {c.name for c in calls}, cancelled, turn_tools)


async def _run_all(
    claim: Claim,
    writer: TranscriptWriter,
    calls: list[ToolCall],
    activities: list[Activity],
    offered: set[str],
    cancelled: asyncio.Event,
    turn_tools: TurnTools,
) -> None:
    lock = asyncio.Lock()  # one write at a time: the parts list is shared
    runs = [
        _run_one(claim, writer, call, activity, offered, cancelled, lock, turn_tools)
        for call, activity in zip(calls, activities, strict=True)
    ]
    await asyncio.gather(*runs)


def _activity_event(claim: Claim, activity: Activity) -> list[NewEvent]:
    return activity_events(claim.turn_id, [activity_announced(activity)])


async def _run_one(
    claim: Claim,
    writer: TranscriptWriter,
    call: ToolCall,
    activity: Activity,
    offered: set[str],
    cancelled: asyncio.Event,
    lock: asyncio.Lock,
    turn_tools: TurnTools,
) -> None:
    async def write_progress(progress: dict[str, Any]) -> None:
        async with lock:
            activity_progress(activity, progress)
            reported = tool_progress(claim.turn_id, tool_call_id=call.id, progress=activity.progress)
            await writer.record([reported, *_activity_event(claim, activity)], (activity,))

    async def on_running() -> None:
        async with lock:
            activity_running(activity)
            await writer.record(_activity_event(claim, activity), (activity,))

    progress = ProgressCoalescer(write_progress)
    tool = tool_get(call.name) if call.name in offered else None
    if tool is None:
        result = failed_call(ActivityStatus.FAILED, "unknown_tool", f"There is no tool named {call.name[:80]!r}.")
    else:
        context = ToolContext(
            conversation_id=claim.conversation_id,
            turn_id=claim.turn_id,
            tool_call_id=call.id,
            cancelled=cancelled,
            report_progress=progress.report,
            provider_key=turn_tools.provider_key,
            conversation_live=partial(conversation_is_active, conversation_id=claim.conversation_id),
            untrusted_read=partial(conversation_has_read_untrusted, conversation_id=claim.conversation_id),
            hint_owner=partial(activity_hint, activity),  # stored with the call's next update
        )
        result = await tool_call_execute(
            tool,
            context,
            call.input,
            availability=turn_tools.availability,
            watch=turn_tools.watch,
            on_running=on_running,
        )
    latest = await progress.close()
    await _record_result(claim, writer, call, activity, result, latest, lock)


async def _record_result(
    claim: Claim,
    writer: TranscriptWriter,
    call: ToolCall,
    activity: Activity,
    result: CallResult,
    latest_progress: dict[str, Any] | None,
    lock: asyncio.Lock,
) -> None:
    async with lock:
        for part in writer.parts:
            if part["type"] == "tool" and part["tool_call_id"] == call.id:
                part["output"] = result.output
                part["status"] = result.status
        writer.parts.extend(_returned_attachments(result))
        if latest_progress is not None:
            activity_progress(activity, latest_progress)
        activity_finish(activity, status=result.status, output=result.output, message=result.message)
        finished = tool_finished(
            claim.turn_id, tool_call_id=call.id, name=call.name, status=result.status, output=result.output
        )
        events = [finished, *_activity_event(claim, activity)]
        await writer.record(events, (activity,))


def _returned_attachments(result: CallResult) -> list[dict[str, Any]]:
    """The attachment parts a call's output hands over (a shell command's out/ files): they join the answer."""
    output = result.output
    if result.status != ActivityStatus.SUCCEEDED or not isinstance(output, dict):
        return []
    listed = output.get("attachments")
    if not isinstance(listed, list):
        return []
    return [dict(part) for part in listed if isinstance(part, dict) and part.get("type") == "attachment"]


class ProgressCoalescer:
    """A call's progress reports, written at most four times a second.

    The first report is written at once; a report that comes sooner than PROGRESS_INTERVAL
    after the last write waits for it, replaced by any newer one. What is still waiting
    when the call ends goes out with the call's final update (`close`). Reports after
    that are ignored: the call's outcome is decided.
    """

    def __init__(self, write: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        self._write = write
        self._last_write: float | None = None
        self._waiting: dict[str, Any] | None = None
        self._timer: asyncio.Task[None] | None = None
        self._writing: asyncio.Future[None] | None = None
        self._closed = False

    async def report(self, progress: dict[str, Any]) -> None:
        if self._closed or not isinstance(progress, dict):
            return
        now = time.monotonic()
        if self._last_write is None or now - self._last_write >= PROGRESS_INTERVAL:
            if self._timer is not None and not self._timer.done():
                self._waiting = progress  # the timer writes it, in order
                return
            self._waiting = None
            await self._write_now(progress)
            return
        self._waiting = progress
        if self._timer is None or self._timer.done():
            self._timer = asyncio.get_running_loop().create_task(self._write_later())

    async def _write_now(self, progress: dict[str, Any]) -> None:
        self._last_write = time.monotonic()
        self._writing = asyncio.ensure_future(self._write(progress))
        try:
            await asyncio.shield(self._writing)
        finally:
            self._writing = None

    async def _write_later(self) -> None:
        # Until nothing waits: a report that came while this wrote is written in turn.
        while not self._closed and self._waiting is not None:
            assert self._last_write is not None
            await asyncio.sleep(max(0.0, self._last_write + PROGRESS_INTERVAL - time.monotonic()))
            if self._closed or self._waiting is None:
                return
            progress, self._waiting = self._waiting, None
            await self._write_now(progress)

    async def close(self) -> dict[str, Any] | None:
        """Stop writing; return the latest report not written yet (for the final update)."""
        self._closed = True
        if self._writing is not None:
            with suppress(Exception):
                await asyncio.shield(self._writing)  # a write under way completes first
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._timer
        waiting, self._waiting = self._waiting, None
        return waiting


def rerun_calls_of(parts: list[dict[str, Any]]) -> list[ToolCall]:
    """The tool calls in an answer's parts that still await their output (recovery runs them)."""
    return [
        ToolCall(
            part["tool_call_id"], part["name"], part.get("input") or {}, provider_id=part.get("provider_call_id", "")
        )
        for part in parts
        if part["type"] == "tool" and part.get("output") is None
    ]
