"""Every event a conversation's log can hold, and the payloads sent to its sockets.

`EventKind` names every kind (PROTOCOL.md's list and its additions); each payload is
built by one function here, so a kind's `data` has one shape wherever it is written
(the engine, the turn services, recovery).
"""

from __future__ import annotations

import enum
import uuid
from typing import Any, Literal, NotRequired, TypedDict

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
    BROWSER_TASK_DISMISSED = "browser_task.dismissed"  # an addition: the owner dismissed a proposal
    BROWSER_TASK_STEP = "browser_task.step"  # an addition: a step of a task's record, new or changed
    # An addition: the owner confirmed or dismissed a write a tainted turn proposed (memory, a task).
    WRITE_PROPOSAL_UPDATED = "write_proposal.updated"
    # An addition: the owner cleared the history; every earlier event is gone, start over.
    CONVERSATION_CLEARED = "conversation.cleared"
    # An addition: another branch of versions is shown (a switch, or a version added);
    # `turn_id` is its newest turn. Clients load the transcript again.
    CONVERSATION_BRANCH_SWITCHED = "conversation.branch_switched"


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


def browser_task_proposed(
    *,
    proposal_id: uuid.UUID,
    goal: str,
    start_url: str,
    restrictions: list[str],
    corrects_task_id: uuid.UUID | None,
    carried_restrictions: list[str],
) -> NewEvent:
    """`corrects_task_id` and `carried_restrictions` (the leading `restrictions` it carried over) are additions."""
    data = {
        "proposal_id": str(proposal_id),
        "goal": goal,
        "start_url": start_url,
        "restrictions": restrictions,
        "corrects_task_id": str(corrects_task_id) if corrects_task_id is not None else None,
        "carried_restrictions": carried_restrictions,
    }
    return (EventKind.BROWSER_TASK_PROPOSED, None, data)


def write_proposal_updated(*, turn_id: uuid.UUID, proposal: dict[str, Any]) -> NewEvent:
    """`data.proposal` is the proposal as `tools.proposals.proposal_json` shows it, decided."""
    return (EventKind.WRITE_PROPOSAL_UPDATED, turn_id, {"proposal": proposal})


def browser_task_dismissed(*, proposal_id: uuid.UUID) -> NewEvent:
    return (EventKind.BROWSER_TASK_DISMISSED, None, {"proposal_id": str(proposal_id)})


def browser_task_started(*, task_id: uuid.UUID, proposal_id: uuid.UUID) -> NewEvent:
    """`task_id` is the contract's; `proposal_id` an addition, so clients tie the task to its readback."""
    return (EventKind.BROWSER_TASK_STARTED, None, {"task_id": str(task_id), "proposal_id": str(proposal_id)})


def critical_point_opened(
    *,
    task_id: uuid.UUID,
    critical_point_id: uuid.UUID,
    kind: str,
    question: str,
    action: dict[str, Any] | None,
    created_at: str | None,
) -> NewEvent:
    """`created_at` is an addition: when the question was asked, for the task's record."""
    data = {
        "task_id": str(task_id),
        "critical_point_id": str(critical_point_id),
        "kind": kind,
        "question": question,
        "action": action,
        "created_at": created_at,
    }
    return (EventKind.CRITICAL_POINT_OPENED, None, data)


def critical_point_resolved(
    *, task_id: uuid.UUID, critical_point_id: uuid.UUID, answer: dict[str, Any], resolved_at: str | None
) -> NewEvent:
    """`answer` and `resolved_at` are additions: what the owner answered and when, for the task's record."""
    data = {
        "task_id": str(task_id),
        "critical_point_id": str(critical_point_id),
        "answer": answer,
        "resolved_at": resolved_at,
    }
    return (EventKind.CRITICAL_POINT_RESOLVED, None, data)


def browser_task_step(*, task_id: uuid.UUID, step: dict[str, Any]) -> NewEvent:
    """A step of a task's record as the owner sees it (`lifecycle.record`); a later one of its number replaces it."""
    return (EventKind.BROWSER_TASK_STEP, None, {"task_id": str(task_id), "step": step})


def browser_task_finished(*, task_id: uuid.UUID, outcome: str, summary: str) -> NewEvent:
    return (EventKind.BROWSER_TASK_FINISHED, None, {"task_id": str(task_id), "outcome": outcome, "summary": summary})


class BrowserFrame(TypedDict):
    """Sent to a conversation's group by the worker holding a sign-in's page: one live-view picture.

    A presentation signal only: never stored, never replayed, no sequence.
    """

    type: Literal["browser.frame"]
    task_id: str
    image: str  # base64 JPEG
    width: int  # the page's viewport in CSS pixels, to map clicks on the picture back to the page
    height: int


class BrowserInput(TypedDict):
    """Sent by a socket to the group of a task's live view: the owner's click or key, never stored."""

    type: Literal["browser.input"]
    critical_point_id: str
    input: dict[str, Any]


def browser_input_group(task_id: uuid.UUID | str) -> str:
    """Return the Channels group the worker holding a task's sign-in page listens on."""
    return f"browser-task-input.{task_id}"


class ConversationDeleted(TypedDict):
    """Sent to a conversation's group when it is deleted: sockets close with 4004."""

    type: Literal["conversation.deleted"]


class OwnerChanged(TypedDict):
    """Sent to every socket of the owner: a conversation's unread count, its place in the list or
    name, or the needs-you list may have moved.

    Each socket answers its page with an `unread` frame (the count read fresh), when
    `listed` is set a `conversation_changed` frame (the conversation read fresh), and when
    `attention` is set an `attention_changed` frame; none carries a sequence.
    """

    type: Literal["owner.changed"]
    conversation_id: str | None
    attention: bool
    # An addition: a message moved the conversation to the top of the list, or it was named.
    listed: NotRequired[bool]


# Kinds whose event may change the needs-you list (settings_ui.selectors.attention_items):
# questions opened and answered, proposals made, started and dismissed, tasks ended, task
# runs' outcomes, and tool calls (one refused for want of configuration is listed).
ATTENTION_EVENT_KINDS = frozenset(
    {
        EventKind.CRITICAL_POINT_OPENED,
        EventKind.CRITICAL_POINT_RESOLVED,
        EventKind.BROWSER_TASK_PROPOSED,
        EventKind.BROWSER_TASK_STARTED,
        EventKind.BROWSER_TASK_DISMISSED,
        EventKind.BROWSER_TASK_FINISHED,
        EventKind.TASK_RUN_UPDATED,
        EventKind.CONVERSATION_CLEARED,
    }
)


def event_moves_attention(kind: str, data: dict[str, Any]) -> bool:
    """Whether an event of this kind and data may change the needs-you list."""
    if kind == EventKind.TOOL_FINISHED:
        return data.get("status") == "unavailable"
    return kind in ATTENTION_EVENT_KINDS


def conversation_group(conversation_id: uuid.UUID | str) -> str:
    """Return the Channels group of every socket open on this conversation."""
    return f"conversation.{conversation_id}"
