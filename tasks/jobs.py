"""Celery jobs of the tasks app: thin wrappers that parse ids and call services (queue `default`)."""

from __future__ import annotations

import logging
import threading
import uuid

from celery import shared_task

from conversations.eventlog import events_publish_sync
from tasks import runs

logger = logging.getLogger(__name__)

RETRY_SECONDS = 2
# Task jobs running at once in one worker process. They are short and spend their time in
# Python (the ORM); more of them at once only take the interpreter lock from the turns the
# same process is streaming (bench/tasks.py measures both).
_RUNNING = threading.BoundedSemaphore(4)


@shared_task(name="tasks.jobs.task_fire")
def task_fire(task_id: str) -> None:
    """Beat fired a task's row: take its armed occurrence if due, arm the next, and dispatch the run."""
    with _RUNNING:
        fired = runs.task_fire(task_id=uuid.UUID(task_id), publish=False)
        if fired is None:
            return
        try:
            runs.run_dispatch(run_id=fired.run_id, unpublished=fired.frames)
        except Exception:
            logger.warning("dispatch of task run %s failed; trying again", fired.run_id, exc_info=True)
            events_publish_sync(conversation_id=fired.conversation_id, frames=fired.frames)
            task_run_dispatch.apply_async(args=(str(fired.run_id),), kwargs={"attempt": 2}, countdown=RETRY_SECONDS)


@shared_task(name="tasks.jobs.task_run_dispatch")
def task_run_dispatch(run_id: str, attempt: int = 1) -> None:
    """Try a run's dispatch again (at most DISPATCH_TRIES in all; reconciliation may add one)."""
    try:
        with _RUNNING:
            runs.run_dispatch(run_id=uuid.UUID(run_id))
    except Exception:
        if attempt >= runs.DISPATCH_TRIES:
            logger.warning("dispatch of task run %s failed %d times; reconciliation may try once more", run_id, attempt)
            return
        task_run_dispatch.apply_async(args=(run_id,), kwargs={"attempt": attempt + 1}, countdown=RETRY_SECONDS)


@shared_task(name="tasks.jobs.tasks_reconcile")
def tasks_reconcile() -> None:
    """Repair lost fires, dispatches, projections and schedules."""
    runs.tasks_reconcile()
