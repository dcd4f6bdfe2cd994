"""A task's activity card: the one card a browser task shows in its conversation, as the task now stands."""

from __future__ import annotations

import uuid

from conversations.events import EventKind, NewEvent
from conversations.models import BrowserTask, BrowserTaskStatus
from tools.activity import Activity, activity_from_row, activity_progress, activity_store, safe_text
from tools.models import ActivityStatus, ToolActivity

MAX_ACTIONS = 40  # a task's actions in all (the runner stops it there; the card counts toward it)
CARD_KIND = "browser_task"
CARD_LABEL = "Browser task"
_CARD_STATUS = {
    BrowserTaskStatus.RUNNING: ActivityStatus.RUNNING,
    BrowserTaskStatus.PAUSED: ActivityStatus.RUNNING,
    BrowserTaskStatus.COMPLETED: ActivityStatus.SUCCEEDED,
    BrowserTaskStatus.FAILED: ActivityStatus.FAILED,
    BrowserTaskStatus.CANCELLED: ActivityStatus.CANCELLED,
    BrowserTaskStatus.SUPERSEDED: ActivityStatus.CANCELLED,  # stopped for the owner's correction
}


def card_id(task_id: uuid.UUID) -> str:
    """The tool_call_id of a task's activity card; its turn_id is the task's id."""
    return f"browser_task:{task_id}"


def task_card_events(task: BrowserTask, *, progress: str | None = None, summary: str = "") -> list[NewEvent]:
    """Store the task's activity card as the task now stands and return its `activity.updated` event."""
    row = ToolActivity.objects.filter(turn_id=task.id, tool_call_id=card_id(task.id)).first()
    if row is not None:
        activity = activity_from_row(row)
    else:
        activity = Activity(
            conversation_id=task.conversation_id,
            turn_id=task.id,
            tool_call_id=card_id(task.id),
            kind=CARD_KIND,
            label=CARD_LABEL,
            execution_count=1,
            created_at=task.created_at,
            started_at=task.created_at,
        )
    activity.status = _CARD_STATUS[BrowserTaskStatus(task.status)]
    if progress is not None:
        activity_progress(activity, {"message": progress, "done": task.actions, "total": MAX_ACTIONS})
    if task.finished_at is not None:
        activity.finished_at = task.finished_at
        activity.summary = safe_text(summary)
    activity_store(activity)
    return [(EventKind.ACTIVITY_UPDATED, None, {"activity": activity.as_json()})]
