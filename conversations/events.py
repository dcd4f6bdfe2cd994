"""Every event a conversation's log can hold, and the payloads sent to its sockets.

`EventKind` names every kind (PROTOCOL.md's list and its additions); each payload is
built by one function here, so a kind's `data` has one shape wherever it is written
(the engine, the turn services, recovery).
"""

from __future__ import annotations

import enum
import uuid
from typing import Any, Literal, TypedDict

from tools.activity import ActivityJson


class EventKind(enum.StrEnum):
    TURN_QUEUED = "turn.queued"
    TURN_STARTED = "turn.started"
    TEXT_DELTA = "text.delta"
    TOOL_STARTED = "tool.started"
    TOOL_PROGRESS = "tool.progress"
    TOOL_FINISHED = "tool.finished"
    TURN_COMPLETED = "turn.completed"
    TURN_FAILED = "turn.failed"
    TURN_CANCELLED = "turn.cancelled"
    ACTIVITY_UPDATED = "activity.updated"
    MESSAGE_REPLACED = "message.replaced"
    CRITICAL_POINT_OPENED = "critical_point.opened"
    CRITICAL_POINT_RESOLVED = "critical_point.resolved"
    TASK_RUN_UPDATED = "task_run.updated"
    BROWSER_TASK_PROPOSED = "browser_task.proposed"
    BROWSER_TASK_STARTED = "browser_task.started"
    BROWSER_TASK_FINISHED = "browser_task.finished"


# An event to append: its kind, the turn it belongs to (if any), and its data.
NewEvent = tuple[str, uuid.UUID | None, dict[str, Any]]

TURN_ENDED = {
    "completed": EventKind.TURN_COMPLETED,
    "failed": EventKind.TURN_FAILED,
    "cancelled": EventKind.TURN_CANCELLED,
}


def turn_queued_data(*, request_id: uuid.UUID, message: dict[str, Any]) -> dict[str, Any]:
    return {"request_id": str(request_id), "message": message}


def turn_started_data(*, attempt: int) -> dict[str, Any]:
    return {"attempt": attempt}


def turn_ended(turn_id: uuid.UUID, *, status: str, code: str = "", message: str = "") -> NewEvent:
    """The closing event of a turn: completed, failed (with a safe message) or cancelled."""
    data: dict[str, Any] = {"code": code, "message": message} if status == "failed" else {}
    return (TURN_ENDED[status], turn_id, data)


def text_delta(turn_id: uuid.UUID, *, message_id: uuid.UUID, text: str) -> NewEvent:
    return (EventKind.TEXT_DELTA, turn_id, {"text": text, "message_id": str(message_id)})


def tool_started(turn_id: uuid.UUID, *, tool_call_id: str, name: str, input: Any) -> NewEvent:
    return (EventKind.TOOL_STARTED, turn_id, {"tool_call_id": tool_call_id, "name": name, "input": input})


def tool_progress(turn_id: uuid.UUID, *, tool_call_id: str, progress: Any) -> NewEvent:
    return (EventKind.TOOL_PROGRESS, turn_id, {"tool_call_id": tool_call_id, "progress": progress})


def tool_finished(turn_id: uuid.UUID, *, tool_call_id: str, name: str, status: str, output: Any) -> NewEvent:
    data = {"tool_call_id": tool_call_id, "name": name, "status": status, "output": output}
    return (EventKind.TOOL_FINISHED, turn_id, data)


def message_replaced(turn_id: uuid.UUID, *, parts: list[dict[str, Any]]) -> NewEvent:
    """A retried step starts over: clients show these parts instead."""
    return (EventKind.MESSAGE_REPLACED, turn_id, {"parts": parts})


def activity_events(turn_id: uuid.UUID, activities: list[ActivityJson]) -> list[NewEvent]:
    """The `activity.updated` events announcing these activities."""
    return [(EventKind.ACTIVITY_UPDATED, turn_id, {"activity": activity}) for activity in activities]


class ConversationDeleted(TypedDict):
    """Sent to a conversation's group when it is deleted: sockets close with 4004."""

    type: Literal["conversation.deleted"]


def conversation_group(conversation_id: uuid.UUID | str) -> str:
    """Return the Channels group of every socket open on this conversation."""
    return f"conversation.{conversation_id}"
