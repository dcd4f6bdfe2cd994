"""Celery jobs of the tasks app: thin wrappers that parse ids and call services (queue `default`)."""

from __future__ import annotations

import threading
import uuid

from celery import shared_task

from tasks import runs

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
            runs.run_dispatch_try(run_id=fired.run_id, fired=fired)


@shared_task(name="tasks.jobs.task_run_dispatch")
def task_run_dispatch(run_id: str, attempt: int = 1) -> None:
    """Try a run's dispatch again (at most DISPATCH_TRIES in all; reconciliation may add one)."""
    with _RUNNING:
        runs.run_dispatch_try(run_id=uuid.UUID(run_id), attempt=attempt)


@shared_task(name="tasks.jobs.tasks_reconcile")
def tasks_reconcile() -> None:
    """Repair lost fires, dispatches, projections and schedules."""
    runs.tasks_reconcile()
