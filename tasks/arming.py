"""What beat holds for each task: one clocked, one-off `PeriodicTask` at its next occurrence.

Arming replaces the task's row pair (a new `PeriodicTask` under the same name, with a new
`ClockedSchedule`) rather than editing it: beat writes its own bookkeeping (run count,
last run) back to the row it fired and disables a one-off that ran, which would undo an
edit made to that same row. Saving or deleting a `PeriodicTask` marks beat's schedule as
changed (django-celery-beat's signals), and beat reloads it on its next tick (at most 5 s).

A write that fails leaves the task with `scheduling_error` set and `armed_at` kept, so
reconciliation can arm it again from the task.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime

from django.db import DatabaseError, transaction
from django_celery_beat.models import ClockedSchedule, PeriodicTask

from tasks.models import ScheduleKind, Task, TaskState
from tasks.schedule import Schedule, instant_text, occurrences

logger = logging.getLogger(__name__)

FIRE_JOB = "tasks.jobs.task_fire"
SCHEDULE_UNAVAILABLE = "schedule_unavailable"


def task_schedule(task: Task) -> Schedule:
    """Return a task's schedule as stored."""
    if task.schedule_kind == ScheduleKind.ONCE:
        return Schedule("once", at=task.once_at)
    return Schedule("cron", expression=task.cron_expression, timezone=task.timezone)


def periodic_name(task_id: object) -> str:
    return f"flarebot task {task_id}"


def next_occurrence(task: Task, *, after: datetime) -> datetime | None:
    """The occurrence a task should be armed at: its one-off instant (even overdue), or the next cron instant."""
    if task.state != TaskState.ACTIVE or not task.enabled or task.consumed:
        return None
    if task.schedule_kind == ScheduleKind.ONCE:
        return task.once_at
    return next(occurrences(task_schedule(task), after=after), None)


def schedule_disarm(task: Task) -> None:
    """Remove what beat holds for a task (inside the caller's transaction)."""
    stale = PeriodicTask.objects.filter(name=periodic_name(task.id)).select_related("clocked").first()
    if stale is not None:
        clocked = stale.clocked
        stale.delete()
        if clocked is not None:
            clocked.delete()
    task.periodic_task = None
    task.armed_at = None
    task.scheduling_error = ""


def schedule_arm(task: Task, *, after: datetime) -> None:
    """Arm a locked task at its next occurrence after `after` (or nothing); the caller saves the task."""
    schedule_disarm(task)
    at = next_occurrence(task, after=after)
    if at is not None:
        _write(task, at)


def schedule_rearm(task: Task, *, now: datetime) -> None:
    """Give beat back a task's schedule that went missing: the occurrence it was armed at, or the next one."""
    at = task.armed_at
    schedule_disarm(task)
    if at is None or next_occurrence(task, after=now) is None:
        schedule_arm(task, after=now)
    else:
        _write(task, at)


def _write(task: Task, at: datetime) -> None:
    task.armed_at = at
    try:
        with transaction.atomic():
            clocked = ClockedSchedule.objects.create(clocked_time=at)
            task.periodic_task = PeriodicTask.objects.create(
                name=periodic_name(task.id),
                task=FIRE_JOB,
                clocked=clocked,
                one_off=True,
                kwargs=json.dumps({"task_id": str(task.id), "version": task.version, "intended_at": instant_text(at)}),
                description="A Flarebot scheduled task's next occurrence (managed by Flarebot; edit the task instead).",
            )
    except DatabaseError:
        logger.warning("could not arm the schedule of task %s", task.id, exc_info=True)
        task.scheduling_error = SCHEDULE_UNAVAILABLE
