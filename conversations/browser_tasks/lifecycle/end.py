"""The end of a task: its terminal outcome, then its projection into the conversation as an answer.

The outcome is committed first; after commit it is published, projected (a completed turn
of its own, idempotent by a request id made from the task id; reconciliation retries it,
never rerunning browser work) and the task's browser context released.
"""

from __future__ import annotations

import logging
import uuid

from django.db import transaction
from django.utils import timezone

from conversations import sql
from conversations.browser_tasks.lifecycle.card import task_card_events
from conversations.eventlog import events_append, events_insert, events_publish_after_commit, events_publish_sync
from conversations.events import NewEvent, browser_task_finished, message_replaced, turn_ended
from conversations.models import (
    BrowserTask,
    BrowserTaskStatus,
    CriticalPoint,
    CriticalPointState,
    Message,
    MessageRole,
    Turn,
    TurnStatus,
    answer_ordinal,
)
from conversations.titles import DEFAULT_NAME
from tools.web.leases import browser_leases_request_close

logger = logging.getLogger(__name__)

CANCELLED_SUMMARY = "The owner cancelled the browser task."
SUPERSEDED_SUMMARY = "The owner corrected the task; the corrected task continues in its place."
PROJECTION_NAMESPACE = uuid.UUID("0b5f6c1e-7d1c-4f55-9a1e-4a3f2b6d9c10")
_OUTCOME_TITLE = {
    BrowserTaskStatus.COMPLETED: "Browser task completed.",
    BrowserTaskStatus.FAILED: "Browser task failed.",
    BrowserTaskStatus.CANCELLED: "Browser task cancelled.",
    BrowserTaskStatus.SUPERSEDED: "Browser task superseded.",
}


def task_end_locked(task: BrowserTask, status: str, summary: str) -> None:
    """Record a locked task's terminal outcome; after commit: publish, project, release the browser."""
    now = timezone.now()
    task.status = status
    task.outcome_summary = summary
    task.finished_at = now
    task.lease_token = ""
    task.lease_expires_at = None
    task.authorization = None
    task.storage_sealed = None  # the checkpoint's browser state is not kept past the end
    task.save()
    CriticalPoint.objects.filter(task_id=task.id, state=CriticalPointState.OPEN).update(
        state=CriticalPointState.VOID, resolved_at=now
    )
    events: list[NewEvent] = [browser_task_finished(task_id=task.id, outcome=status, summary=summary)]
    events += task_card_events(task, progress="Finished", summary=summary)
    frames = events_append(conversation_id=task.conversation_id, events=events)
    task_id, conversation_id, context = task.id, task.conversation_id, task.context_lease_id

    def after() -> None:
        events_publish_sync(conversation_id=conversation_id, frames=frames)
        try:
            browser_task_project(task_id=task_id)
        except Exception:
            logger.exception("browser task %s: its outcome was not projected yet; reconciliation retries", task_id)
        if context is not None:
            browser_leases_request_close(lease_id=context)

    transaction.on_commit(after)


def projection_text(status: str, summary: str) -> str:
    title = _OUTCOME_TITLE[BrowserTaskStatus(status)]
    return f"**{title}** {summary}".strip()


def browser_task_project(*, task_id: uuid.UUID) -> bool:
    """Project an ended task's outcome as an assistant message (once); True when it did now."""
    with transaction.atomic():
        task = (
            BrowserTask.objects.select_for_update()
            .filter(id=task_id, finished_at__isnull=False, projected_at__isnull=True)
            .first()
        )
        if task is None:
            return False
        now = timezone.now()
        turn_id = uuid.uuid4()
        parts = [{"type": "text", "text": projection_text(task.status, task.outcome_summary)}]
        events = [message_replaced(turn_id, parts=parts), turn_ended(turn_id, status=TurnStatus.COMPLETED)]
        # The task was proposed in a turn of this conversation, so this is never its first
        # turn and never titles it (an untitled conversation's name is DEFAULT_NAME anyway).
        reserved = sql.conversation_reserve_turn(
            conversation_id=task.conversation_id,
            request_id=uuid.uuid5(PROJECTION_NAMESPACE, str(task.id)),
            turn_id=turn_id,
            title=DEFAULT_NAME,
            now=now,
            events=len(events),
        )
        if reserved is not None:
            ordinal, first, parent = reserved
            turn = Turn.objects.create(
                id=turn_id,
                conversation_id=task.conversation_id,
                ordinal=ordinal,
                parent_turn_id=parent,
                request_id=uuid.uuid5(PROJECTION_NAMESPACE, str(task.id)),
                status=TurnStatus.COMPLETED,
                started_at=now,
                finished_at=now,
            )
            Message.objects.create(
                conversation_id=task.conversation_id,
                turn=turn,
                role=MessageRole.ASSISTANT,
                ordinal=answer_ordinal(ordinal),
                parts=parts,
            )
            events_publish_after_commit(
                conversation_id=task.conversation_id, frames=events_insert([(task.conversation_id, first, events)])
            )
        BrowserTask.objects.filter(id=task_id).update(projected_at=now)
    return True
