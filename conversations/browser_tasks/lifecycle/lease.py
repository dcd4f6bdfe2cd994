"""Who runs a task: the one predicate of its lease, the claim, and the attempt's hold on the task.

The claim is a conditional update that takes a running task of an active conversation
where `lease_over` holds; it counts the attempt, and an action a crash cut off becomes
"interrupted" (never done again by itself). Every later write of the attempt locks the task
by its lease token (`task_lock_owned`), so an attempt that lost its lease changes nothing.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from conversations.browser_tasks.lifecycle.end import task_end_locked
from conversations.browser_tasks.lifecycle.record import step_events
from conversations.errors import LeaseLost
from conversations.eventlog import events_append_published
from conversations.models import BrowserTask, BrowserTaskStatus, Conversation, ConversationState

LEASE = timedelta(seconds=15)
LEASE_RENEW_SECONDS = 5.0
MAX_ATTEMPTS = 10
MAX_RUNNING = timedelta(minutes=15)  # pauses excluded
INTERRUPTED_SUMMARY = "The browser task was interrupted repeatedly and was stopped."


def lease_over(now: datetime) -> Q:
    """No attempt holds the task at `now`: it has no lease time (never claimed, paused, ended) or the time ran out.

    The one predicate of a task's ownership: a claim takes a task only where it holds and
    reconciliation enqueues those again; cancel and deletion take a running task where it
    does not hold as one that a worker runs. A released lease (`browser_task_lease_release`)
    keeps its time without a token, so nobody claims the task before then.
    """
    return Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now)


def browser_tasks_held(tasks: QuerySet[BrowserTask]) -> bool:
    """Whether a live lease holds any of these running tasks right now."""
    return tasks.filter(status=BrowserTaskStatus.RUNNING).exclude(lease_over(timezone.now())).exists()


@dataclass(frozen=True)
class TaskClaim:
    task_id: uuid.UUID
    conversation_id: uuid.UUID
    lease_token: str
    goal: str
    start_url: str
    restrictions: list[str]
    steps: list[dict[str, Any]]
    actions: int
    running_ms: int
    current_url: str
    context_lease_id: uuid.UUID | None
    authorization: dict[str, Any] | None
    cancel_requested: bool


INTERRUPTED_RESULT = {
    "ok": False,
    "error": "interrupted",
    "message": "This action was interrupted by a crash; whether it took effect is unknown. Read the page to check.",
}


def browser_task_claim(*, task_id: uuid.UUID) -> TaskClaim | None:
    """Give a running task no live attempt holds to a new attempt; None when it is not claimable."""
    now = timezone.now()
    token = secrets.token_hex(16)
    with transaction.atomic():
        # Every condition names the task's own row (the conversation only through `IN`), so the
        # update is a plain `UPDATE ... WHERE`: on PostgreSQL a claim that waited for another's
        # row lock checks the lease again on the row that one committed. Filtering through
        # `conversation__state` would make Django nest the lease test in a subquery that keeps
        # its old snapshot, and two claims at once would both win.
        claimed = (
            BrowserTask.objects.filter(
                id=task_id,
                status=BrowserTaskStatus.RUNNING,
                conversation_id__in=Conversation.objects.filter(state=ConversationState.ACTIVE).values("id"),
            )
            .filter(lease_over(now))
            .update(lease_token=token, lease_expires_at=now + LEASE, attempts=F("attempts") + 1)
        )
        if claimed != 1:
            return None
        task = BrowserTask.objects.select_for_update().get(id=task_id)
        if task.attempts > MAX_ATTEMPTS:
            task_end_locked(task, BrowserTaskStatus.FAILED, INTERRUPTED_SUMMARY)
            return None
        # An action that started but never recorded its result was cut off by a crash: it is
        # never done again by itself; the model is told its outcome is unknown.
        steps = [
            {**step, "result": INTERRUPTED_RESULT}
            if step.get("result") is None and not step.get("critical_point_id")
            else step
            for step in task.steps
        ]
        if steps != task.steps:
            BrowserTask.objects.filter(id=task_id).update(steps=steps)
            events_append_published(
                conversation_id=task.conversation_id, events=step_events(task.id, task.steps, steps)
            )
    return TaskClaim(
        task_id=task.id,
        conversation_id=task.conversation_id,
        lease_token=token,
        goal=task.goal,
        start_url=task.start_url,
        restrictions=list(task.restrictions),
        steps=steps,
        actions=task.actions,
        running_ms=task.running_ms,
        current_url=task.current_url,
        context_lease_id=task.context_lease_id,
        authorization=task.authorization,
        cancel_requested=task.cancel_requested,
    )


def task_lock_owned(task_id: uuid.UUID, token: str) -> BrowserTask:
    """Lock a running task this lease holds and return it; LeaseLost when the lease is no longer its."""
    task = (
        BrowserTask.objects.select_for_update()
        .filter(id=task_id, lease_token=token, status=BrowserTaskStatus.RUNNING)
        .first()
    )
    if task is None:
        raise LeaseLost(str(task_id))
    return task


def browser_task_lease_renew(*, task_id: uuid.UUID, lease_token: str) -> bool:
    """Extend a lease this attempt holds; False means it was lost."""
    return (
        BrowserTask.objects.filter(id=task_id, lease_token=lease_token, status=BrowserTaskStatus.RUNNING).update(
            lease_expires_at=timezone.now() + LEASE
        )
        == 1
    )


def browser_task_cancel_requested(*, task_id: uuid.UUID) -> bool:
    return BrowserTask.objects.filter(id=task_id, cancel_requested=True).exists()


def browser_task_lease_release(*, task_id: uuid.UUID, lease_token: str, retry_in: timedelta) -> None:
    """Give up a claim for now: the task becomes claimable again after `retry_in`."""
    BrowserTask.objects.filter(id=task_id, lease_token=lease_token, status=BrowserTaskStatus.RUNNING).update(
        lease_token="", lease_expires_at=timezone.now() + retry_in
    )


def browser_task_context_set(*, task_id: uuid.UUID, lease_token: str, context_lease_id: uuid.UUID) -> None:
    """Record the browser context the attempt now works in."""
    with transaction.atomic():
        task_lock_owned(task_id, lease_token)
        BrowserTask.objects.filter(id=task_id).update(context_lease_id=context_lease_id)
