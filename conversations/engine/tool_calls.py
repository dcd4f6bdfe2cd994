"""Running the tool calls a model step asked for, in parallel, with their events."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from conversations.engine.writer import TranscriptWriter
from conversations.eventlog import NewEvent
from conversations.providers.base import ToolCall
from conversations.turns import Claim, activity_events
from tools.activity import Activity, activity_begin, activity_finish, activity_progress
from tools.registry import ToolContext, ToolFailed, tool_get

logger = logging.getLogger(__name__)

PROGRESS_INTERVAL = 0.25  # at most four progress writes a second per call


async def run_tool_calls(
    claim: Claim,
    writer: TranscriptWriter,
    step: int,
    calls: list[ToolCall],
    offered: set[str],
    cancelled: asyncio.Event,
) -> None:
    """Record the calls as tool parts, run them together, and record each result."""
    for call in calls:
        writer.parts.append(
            {
                "type": "tool",
                "tool_call_id": call.id,
                "name": call.name,
                "input": call.input,
                "output": None,
                "step": step,
            }
        )
    activities = [
        activity_begin(conversation_id=claim.conversation_id, turn_id=claim.turn_id, tool_call_id=c.id, name=c.name)
        for c in calls
    ]
    events: list[NewEvent] = []
    for call, activity in zip(calls, activities, strict=True):
        started = {"tool_call_id": call.id, "name": call.name, "input": call.input}
        events += [("tool.started", claim.turn_id, started), _activity_event(claim, activity)]
    await writer.record(events, tuple(activities))
    lock = asyncio.Lock()  # one write at a time: the parts list is shared
    runs = [_run_one(claim, writer, c, a, offered, cancelled, lock) for c, a in zip(calls, activities, strict=True)]
    await asyncio.gather(*runs)


def _activity_event(claim: Claim, activity: Activity) -> NewEvent:
    [event] = activity_events(claim.turn_id, [activity.as_json()])
    return event


async def _run_one(
    claim: Claim,
    writer: TranscriptWriter,
    call: ToolCall,
    activity: Activity,
    offered: set[str],
    cancelled: asyncio.Event,
    lock: asyncio.Lock,
) -> None:
    last_progress = 0.0

    async def report_progress(progress: dict[str, Any]) -> None:
        nonlocal last_progress
        now = time.monotonic()
        if now - last_progress < PROGRESS_INTERVAL:
            return
        last_progress = now
        async with lock:
            activity_progress(activity, progress)
            event = ("tool.progress", claim.turn_id, {"tool_call_id": call.id, "progress": progress})
            await writer.record([event, _activity_event(claim, activity)], (activity,))

    tool = tool_get(call.name) if call.name in offered else None
    status, output = "failed", {"error": "unknown_tool", "message": f"There is no tool named {call.name[:80]!r}."}
    if tool is not None:
        context = ToolContext(claim.conversation_id, claim.turn_id, call.id, cancelled, report_progress)
        task = asyncio.ensure_future(tool.run(context, call.input))
        cancel_wait = asyncio.ensure_future(cancelled.wait())
        done, _ = await asyncio.wait({task, cancel_wait}, return_when=asyncio.FIRST_COMPLETED)
        cancel_wait.cancel()
        if task in done:
            status, output = _result(task, call.name)
        else:
            task.cancel()
            status, output = "cancelled", {"error": "cancelled", "message": "The owner stopped this turn."}
    async with lock:
        for part in writer.parts:
            if part["type"] == "tool" and part["tool_call_id"] == call.id:
                part["output"] = output
                part["status"] = status
        activity_finish(activity, status=status, output=output)
        finished = {"tool_call_id": call.id, "name": call.name, "status": status, "output": output}
        await writer.record([("tool.finished", claim.turn_id, finished), _activity_event(claim, activity)], (activity,))


def _result(task: asyncio.Future[Any], name: str) -> tuple[str, Any]:
    try:
        return "succeeded", task.result()
    except ToolFailed as failure:
        return "failed", {"error": "tool_failed", "message": failure.message}
    except Exception:
        logger.exception("tool %s raised", name)
        return "failed", {"error": "tool_failed", "message": "The tool failed unexpectedly."}
