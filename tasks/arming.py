"""What beat holds for each task: one `PeriodicTask` with its own `ClockedSchedule` at the next occurrence.

The pair is made once per task and kept: arming moves the clocked time (and enables the
row), disarming disables it. django-celery-beat's DatabaseScheduler reads the enabled rows
and then their schedules in a second query, so a `ClockedSchedule` deleted between the
two leaves a row without a schedule and stops beat: rows are only deleted (by
reconciliation) long after they were disabled. Beat keeps no bookkeeping on these rows
(`tasks.beat.TaskDatabaseScheduler`), which would undo a re-arm and disable a one-off that ran.

A clocked row whose time is past is due again whenever beat reloads its schedule, so a
fire can come more than once: `runs.task_fire` takes only the occurrence the task is armed
at, once. Rows are changed with `update()` (no model signals). Marking beat's schedule as
changed (`PeriodicTasks`) makes beat reload every row on its next tick (at most 5 s
later), and while it reloads on every tick it sends a few dozen fires a second instead of
hundreds: so a change marks it only when beat must see it soon, an occurrence within
`SIGNAL_WITHIN`. Beat loads only rows due within 5 minutes anyway (and reloads every 5
minutes), and reconciliation marks the schedule changed every 30 s while an armed
occurrence is that close (`schedules_nearing`), so a later one is loaded in time without a
reload for each re-arm of a burst.

A write that fails leaves the task with `scheduling_error` set and `armed_at` kept, so
reconciliation can arm it again.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

from django.db import DatabaseError, transaction
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule, PeriodicTask, PeriodicTasks

from tasks.models import ScheduleKind, Task, TaskState
from tasks.schedule import Schedule, occurrences

logger = logging.getLogger(__name__)

FIRE_JOB = "tasks.jobs.task_fire"
SCHEDULE_UNAVAILABLE = "schedule_unavailable"
# How long a disabled row of a deleted task stays before its pair is removed: beat's two
# reads of its schedule are long over by then.
RETIRED_AFTER = timedelta(minutes=2)
# A re-arm this close tells beat at once; a later one is left to `schedules_nearing`.
SIGNAL_WITHIN = timedelta(seconds=90)
# django-celery-beat loads clocked rows due within this much (SCHEDULE_SYNC_MAX_INTERVAL).
BEAT_WINDOW = timedelta(minutes=5)


def task_schedule(task: Task) -> Schedule:
    """Return a task's schedule as stored."""
    if task.schedule_kind == ScheduleKind.ONCE:
        return Schedule("once", at=task.once_at, timezone=task.timezone or "UTC")
    return Schedule("cron", expression=task.cron_expression, timezone=task.timezone)


PERIODIC_PREFIX = "flarebot task "


def periodic_name(task_id: object) -> str:
    return f"{PERIODIC_PREFIX}{task_id}"


def next_occurrence(task: Task, *, after: datetime) -> datetime | None:
    """The occurrence a task should be armed at: its one-off instant (even overdue), or the next cron instant."""
    if task.state != TaskState.ACTIVE or not task.enabled or task.consumed:
        return None
    if task.schedule_kind == ScheduleKind.ONCE:
        return task.once_at
    return next(occurrences(task_schedule(task), after=after), None)


def _changed() -> None:
    PeriodicTasks.update_changed()


def _changed_if_near(at: datetime | None) -> None:
    if at is not None and at <= timezone.now() + SIGNAL_WITHIN:
        _changed()


def schedule_disarm(task: Task) -> None:
    """Stop beat firing a task (inside the caller's transaction); the caller saves the task.

    A fire of a row beat still holds finds nothing armed.
    """
    if task.periodic_task_id is not None:
        PeriodicTask.objects.filter(id=task.periodic_task_id, enabled=True).update(
            enabled=False, date_changed=timezone.now()
        )
        _changed_if_near(task.armed_at)
    task.armed_at = None
    task.scheduling_error = ""


def schedule_arm(task: Task, *, after: datetime) -> None:
    """Arm a locked task at its next occurrence after `after` (or disarm it); the caller saves the task."""
    at = next_occurrence(task, after=after)
    if at is None:
        schedule_disarm(task)
        return
    _write(task, at)


def schedule_rearm(task: Task, *, now: datetime) -> None:
    """Give beat back what it should hold for a task: the occurrence it was armed at, or the next one."""
    at = task.armed_at
    if at is None or next_occurrence(task, after=now) is None:
        schedule_arm(task, after=now)
    else:
        _write(task, at)


def _write(task: Task, at: datetime) -> None:
    task.armed_at = at
    task.scheduling_error = ""
    try:
        with transaction.atomic():
            periodic = PeriodicTask.objects.filter(id=task.periodic_task_id).first() if task.periodic_task_id else None
            if periodic is None or periodic.clocked_id is None:
                clocked = ClockedSchedule.objects.create(clocked_time=at)
                PeriodicTask.objects.filter(name=periodic_name(task.id)).delete()  # a row left without its task
                task.periodic_task = PeriodicTask.objects.create(
                    name=periodic_name(task.id),
                    task=FIRE_JOB,
                    clocked=clocked,
                    one_off=True,  # what django-celery-beat requires of a clocked row
                    kwargs=json.dumps({"task_id": str(task.id)}),
                    description="A Flarebot scheduled task's next occurrence; managed by Flarebot (edit the task).",
                )
            else:
                ClockedSchedule.objects.filter(id=periodic.clocked_id).update(clocked_time=at)
                if not periodic.enabled:
                    PeriodicTask.objects.filter(id=periodic.id).update(enabled=True, date_changed=timezone.now())
                    _changed()  # beat holds no entry for a disabled row: it must reload to see it
                else:
                    _changed_if_near(at)
    except DatabaseError:
        logger.warning("could not arm the schedule of task %s", task.id, exc_info=True)
        task.scheduling_error = SCHEDULE_UNAVAILABLE


def schedules_retire() -> int:
    """Remove the beat rows of deleted tasks once beat can no longer be reading them; return how many."""
    retired = PeriodicTask.objects.filter(
        name__startswith=PERIODIC_PREFIX, enabled=False, date_changed__lt=timezone.now() - RETIRED_AFTER
    ).exclude(flarebot_task__state=TaskState.ACTIVE)
    count = 0
    for periodic in list(retired.select_related("clocked")[:200]):
        with transaction.atomic():
            clocked_id = periodic.clocked_id
            Task.objects.filter(periodic_task_id=periodic.id).update(periodic_task=None)
            PeriodicTask.objects.filter(id=periodic.id, enabled=False).delete()
            if clocked_id is not None and not PeriodicTask.objects.filter(clocked_id=clocked_id).exists():
                ClockedSchedule.objects.filter(id=clocked_id).delete()
            count += 1
    return count


def schedules_nearing() -> bool:
    """Mark beat's schedule changed if an armed occurrence is within beat's window; return whether one is.

    Beat then reloads and picks up rows armed without telling it (see the docstring).
    """
    now = timezone.now()
    nearing = Task.objects.filter(state=TaskState.ACTIVE, armed_at__gt=now, armed_at__lte=now + BEAT_WINDOW).exists()
    if nearing:
        _changed()
    return nearing
