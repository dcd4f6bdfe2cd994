"""What tasks tell sockets: `task_run.updated`, the event a run's changes append to its
conversation's log, and `tasks.changed`, the notice every Tasks socket gets when a task or a
run changed (its page then reads the tasks again).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from conversations.events import EventKind, NewEvent

logger = logging.getLogger(__name__)


class RunJson(TypedDict):
    """The contract's `R`, with `conversation_id` and `missed_count` added."""

    id: str
    source: str
    intended_at: str | None
    status: str
    turn_id: str | None
    conversation_id: str
    missed_count: int
    created_at: str | None


def task_run_updated(run: RunJson) -> NewEvent:
    """A run was created or its status moved on: `data.run` is the run as it is now."""
    turn_id = uuid.UUID(run["turn_id"]) if run["turn_id"] else None
    data: dict[str, Any] = {"run": dict(run)}
    return (EventKind.TASK_RUN_UPDATED, turn_id, data)


# Every Tasks socket (`tasks.consumers.TasksConsumer`, the Settings page's) joins this group.
TASKS_SOCKETS_GROUP = "tasks-sockets"


class TasksChanged(TypedDict):
    """Sent to every Tasks socket: a task or one of its runs may have changed; the page reads them again."""

    type: Literal["tasks.changed"]


def tasks_changed_send() -> None:
    """Tell every Tasks socket that a task or a run changed (call it after commit); never raises."""
    try:
        async_to_sync(get_channel_layer().group_send)(TASKS_SOCKETS_GROUP, dict(TasksChanged(type="tasks.changed")))
    except Exception:
        # A page reads its tasks again whenever its socket comes back.
        logger.warning("could not tell the Tasks sockets that tasks changed", exc_info=True)
