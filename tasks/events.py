"""The payload of `task_run.updated`, the event a run's changes append to its conversation's log."""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

from conversations.events import EventKind, NewEvent


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
