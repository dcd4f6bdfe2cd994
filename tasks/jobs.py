"""Celery jobs of the tasks app: thin wrappers that parse ids and call services (queue `default`)."""

from __future__ import annotations

import logging
import threading
import uuid

from celery import shared_task

from tasks import runs

logger = logging.getLogger(__name__)

# Task jobs running at once in one worker process. They are short and spend their time in
# Python (the ORM); more of them at once only take the interpreter lock from the turns the
# same process is streaming (bench/tasks.py measures both).
_RUNNING = threading.BoundedSemaphore(4)


@shared_task(name="tasks.jobs.task_fire")
def task_fire(task_id: str) -> None:
    """Beat fired a task's row: take its armed occurrence if due, arm the next, and dispatch the run."""
    with _RUNNING:
        fired = runs.task_fire(task_id=uuid.UUID(task_id), publish=False)
        if fired is not None:
            runs.run_dispatch_or_retry(
                run_id=fired.run_id, conversation_id=fired.conversation_id, unpublished=fired.frames
            )


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
        runs.run_dispatch_later(run_id=uuid.UUID(run_id), attempt=attempt + 1)


@shared_task(name="tasks.jobs.tasks_reconcile")
def tasks_reconcile() -> None:
    """Repair lost fires, dispatches, projections and schedules."""
    runs.tasks_reconcile()
