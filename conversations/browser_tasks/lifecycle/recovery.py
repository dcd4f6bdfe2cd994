"""Recovery and deletion: tasks nobody holds are enqueued again, outcomes not yet projected are projected.

A deleted conversation's unfinished tasks are told to stop, waited for, ended here, and
every checkpoint of the conversation is erased.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from celery import current_app
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from conversations.browser_tasks.lifecycle.end import CANCELLED_SUMMARY, browser_task_project, task_end_locked
from conversations.browser_tasks.lifecycle.lease import browser_tasks_held, lease_over
from conversations.cancel_bus import publish_cancel
from conversations.models import UNFINISHED_TASK_STATUSES, BrowserTask, BrowserTaskStatus, CriticalPoint
from flarebot.core.waiting import wait_until

logger = logging.getLogger(__name__)

STALE_UNCLAIMED = timedelta(seconds=10)  # a running task nobody claimed for this long is enqueued again
RECONCILE_BATCH = 100
RUN_JOB = "conversations.jobs.browser_task_run"


def task_run_enqueue(task_id: uuid.UUID, *, countdown: float = 0.0) -> None:
    """Send the durable job that runs (or resumes) a task; never raises (reconciliation retries)."""
    try:
        current_app.send_task(RUN_JOB, args=[str(task_id)], countdown=countdown or None)
    except Exception:
        logger.warning("could not enqueue browser task %s; reconciliation retries it", task_id, exc_info=True)


def browser_tasks_reconcile() -> int:
    """Enqueue running tasks nobody holds (a dead worker, a lost job) and project unprojected outcomes."""
    now = timezone.now()
    # A task never claimed has no lease time: it is taken again once it waited a moment.
    stale = (
        BrowserTask.objects.filter(status=BrowserTaskStatus.RUNNING)
        .filter(lease_over(now))
        .filter(Q(lease_expires_at__isnull=False) | Q(updated_at__lt=now - STALE_UNCLAIMED))
        .values_list("id", flat=True)[:RECONCILE_BATCH]
    )
    ids = list(stale)
    for task_id in ids:
        task_run_enqueue(task_id)
    unprojected = BrowserTask.objects.filter(finished_at__isnull=False, projected_at__isnull=True).values_list(
        "id", flat=True
    )[:RECONCILE_BATCH]
    for task_id in list(unprojected):
        try:
            browser_task_project(task_id=task_id)
        except Exception:
            logger.exception("browser task %s: projection failed again", task_id)
    return len(ids)


def browser_tasks_stop_for_deletion(*, conversation_id: uuid.UUID, timeout: float) -> bool:
    """Cancel a deleted conversation's unfinished tasks and erase every checkpoint; False if one still ran."""
    unfinished = list(
        BrowserTask.objects.filter(conversation_id=conversation_id, status__in=UNFINISHED_TASK_STATUSES).values_list(
            "id", flat=True
        )
    )
    BrowserTask.objects.filter(id__in=unfinished).update(cancel_requested=True)
    for task_id in unfinished:
        publish_cancel(task_id)
    tasks = BrowserTask.objects.filter(conversation_id=conversation_id)
    stopped = wait_until(lambda: not browser_tasks_held(tasks), timeout=timeout)
    for task_id in unfinished:
        with transaction.atomic():
            task = (
                BrowserTask.objects.select_for_update().filter(id=task_id, status__in=UNFINISHED_TASK_STATUSES).first()
            )
            if task is not None:
                task_end_locked(task, BrowserTaskStatus.CANCELLED, CANCELLED_SUMMARY)
    BrowserTask.objects.filter(conversation_id=conversation_id).update(
        storage_sealed=None, steps=[], authorization=None, current_url=""
    )
    CriticalPoint.objects.filter(task__conversation_id=conversation_id).update(response="")
    return stopped
