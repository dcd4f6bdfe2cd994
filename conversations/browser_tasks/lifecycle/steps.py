"""What an attempt records as it goes: its steps (the checkpoint, without the browser state), a pause, its end.

Each write locks the task by the attempt's lease token and raises LeaseLost (the finish
returns False) when the attempt no longer holds it. A pause stores the open question and
releases the lease: the worker slot is free while the owner thinks.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from conversations.browser_tasks.lifecycle.card import task_card_events
from conversations.browser_tasks.lifecycle.checkpoint import storage_seal
from conversations.browser_tasks.lifecycle.end import task_end_locked
from conversations.browser_tasks.lifecycle.lease import task_lock_owned
from conversations.browser_tasks.lifecycle.record import step_events
from conversations.errors import LeaseLost
from conversations.eventlog import events_append_published
from conversations.events import NewEvent, critical_point_opened
from conversations.models import BrowserTaskStatus, CriticalPoint
from flarebot.core.times import iso


@dataclass
class Progress:
    """What an attempt records after each step (its checkpoint, without the browser state)."""

    steps: list[dict[str, Any]]
    actions: int
    running_ms: int
    current_url: str
    authorization: dict[str, Any] | None


def browser_task_step_record(
    *, task_id: uuid.UUID, lease_token: str, progress: Progress, card: str | None = None
) -> None:
    """Store the attempt's steps so far (and the card's current step); LeaseLost if it is no longer ours."""
    with transaction.atomic():
        task = task_lock_owned(task_id, lease_token)
        events: list[NewEvent] = step_events(task.id, task.steps, progress.steps)
        task.steps = progress.steps
        task.actions = progress.actions
        task.running_ms = progress.running_ms
        task.current_url = progress.current_url[:4096]
        task.authorization = progress.authorization
        task.save(update_fields=["steps", "actions", "running_ms", "current_url", "authorization", "updated_at"])
        if card is not None:
            events += task_card_events(task, progress=card)
        if events:
            events_append_published(conversation_id=task.conversation_id, events=events)


@dataclass(frozen=True)
class Pause:
    kind: str
    question: str
    action: dict[str, Any] | None = None  # what the owner may see of a held action
    action_digest: str = ""


def browser_task_pause(
    *,
    task_id: uuid.UUID,
    lease_token: str,
    progress: Progress,
    pause: Pause,
    point_id: uuid.UUID,
    storage_state: dict[str, Any] | None,
) -> None:
    """Persist the checkpoint and the open question, release the lease, announce `critical_point.opened`."""
    sealed = storage_seal(storage_state) if storage_state is not None else None
    with transaction.atomic():
        task = task_lock_owned(task_id, lease_token)
        steps = step_events(task.id, task.steps, progress.steps)
        point = CriticalPoint.objects.create(
            id=point_id,
            task=task,
            kind=pause.kind,
            question=pause.question,
            action=pause.action,
            action_digest=pause.action_digest,
        )
        task.status = BrowserTaskStatus.PAUSED
        task.lease_token = ""
        task.lease_expires_at = None
        task.steps = progress.steps
        task.actions = progress.actions
        task.running_ms = progress.running_ms
        task.current_url = progress.current_url[:4096]
        task.authorization = None
        if sealed is not None:
            task.storage_sealed = sealed
        task.save()
        opened = critical_point_opened(
            task_id=task.id,
            critical_point_id=point_id,
            kind=pause.kind,
            question=pause.question,
            action=pause.action,
            created_at=iso(point.created_at),
        )
        card = task_card_events(task, progress="Waiting for your answer")
        events_append_published(conversation_id=task.conversation_id, events=[*steps, opened, *card])


def browser_task_finish(*, task_id: uuid.UUID, lease_token: str, status: str, summary: str) -> bool:
    """End a task this attempt holds; False when it was no longer ours."""
    with transaction.atomic():
        try:
            task = task_lock_owned(task_id, lease_token)
        except LeaseLost:
            return False
        task_end_locked(task, status, summary)
    return True
