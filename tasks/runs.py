"""Running tasks: an occurrence's fire, the dispatch of its run, projection from the turn, repair.

- A fire (beat's `PeriodicTask`, or reconciliation for a fire that never came) takes the
  occurrence the task is armed at, once it is due: the claim moves `armed_at` on, so a
  duplicate fire, or one for a schedule edited since, changes nothing. The run row is
  written (unique by occurrence: task, version, instant) and the next occurrence armed in
  that transaction.
- A fire late by more than `GRACE` runs nothing it passed but the latest occurrence, if
  that one is within the grace; the others become one `missed` run with their count.
- The dispatch submits the run's turn (one ordinary user message, marked with the task)
  through `conversations.turns.turn_submit` under a request id derived from the
  occurrence, holding the task's row: the task's version, `enabled` (scheduled runs) and
  the conversation are checked in that transaction, and an edit waits for it and then
  cancels the turn. A retried dispatch finds the same turn.
- A run's status follows its turn (`turn_ended`, reconciliation) and only moves forward;
  every change is a `task_run.updated` event in the conversation's log.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from conversations.eventlog import EventFrame, events_append, events_publish_after_commit, events_publish_sync
from conversations.models import Conversation, ConversationState, Turn
from conversations.turns import turn_cancel_one, turn_submit_unpublished
from flarebot.core.errors import NotFound
from tasks.arming import (
    schedule_arm,
    schedule_disarm,
    schedule_rearm,
    schedules_nearing,
    schedules_retire,
    task_schedule,
)
from tasks.events import task_run_updated, tasks_changed_send
from tasks.models import UNFINISHED_RUN_STATUSES, RunSource, RunStatus, ScheduleKind, Task, TaskRun, TaskState
from tasks.schedule import instant_text, occurrences_between
from tasks.selectors import TURN_TO_RUN, run_view, status_after, task_get

logger = logging.getLogger(__name__)

GRACE = timedelta(minutes=5)  # how late an occurrence may still run
# A fire this much before its occurrence is taken (beat's clock may run a little ahead of a
# worker's); a duplicate fire this close to the next occurrence runs that one early, once.
EARLY = timedelta(seconds=1)
DISPATCH_TRIES = 3  # tries of the fire's dispatch job; reconciliation may add one more
DISPATCH_JOB = "tasks.jobs.task_run_dispatch"  # the tries after the first, RETRY_SECONDS apart
RETRY_SECONDS = 2
RECOVERY_AFTER = timedelta(seconds=10)  # a run still without its turn this long gets reconciliation's try
LOST_FIRE_AFTER = timedelta(seconds=60)  # an armed occurrence this far past whose fire never came
RECONCILE_BATCH = 200
# The turns of runs: uuid5 of this namespace and the occurrence.
RUN_NAMESPACE = uuid.UUID("0c0f4a57-1f8e-4f65-9a8e-3c1c2a7b9d41")


def occurrence_scheduled(task_id: uuid.UUID, version: int, at: datetime) -> str:
    return f"s:{task_id}:{version}:{instant_text(at)}"


def occurrence_manual(task_id: uuid.UUID, request_id: uuid.UUID) -> str:
    return f"m:{task_id}:{request_id}"


def run_request_id(occurrence: str) -> uuid.UUID:
    """The request id of an occurrence's turn: the same for every dispatch of it."""
    return uuid.uuid5(RUN_NAMESPACE, occurrence)


def _append(run: TaskRun) -> list[EventFrame]:
    """Append `task_run.updated` to the run's conversation in the caller's transaction; return its frames.

    The Tasks sockets hear of it once that transaction commits (`tasks.changed`).
    """
    transaction.on_commit(tasks_changed_send)
    try:
        return events_append(conversation_id=run.conversation_id, events=[task_run_updated(run_view(run))])
    except Conversation.DoesNotExist:
        return []  # its conversation is gone, and its log with it


def _announce(run: TaskRun, *, before: list[EventFrame] | None = None) -> None:
    """Append `task_run.updated` (in the caller's transaction) and publish it after commit, after `before`."""
    events_publish_after_commit(conversation_id=run.conversation_id, frames=[*(before or []), *_append(run)])


def _new_run(
    task: Task, *, occurrence: str, source: str, intended_at: datetime, status: str = RunStatus.PENDING, missed: int = 1
) -> tuple[TaskRun, list[EventFrame]]:
    """Insert a run and append its `task_run.updated`; return both (the frames are not published)."""
    assert task.conversation_id is not None
    run = TaskRun.objects.create(
        task=task,
        occurrence=occurrence,
        source=source,
        intended_at=intended_at,
        task_version=task.version,
        status=status,
        request_id=run_request_id(occurrence),
        conversation_id=task.conversation_id,
        missed_count=missed,
    )
    return run, _append(run)


@dataclass(frozen=True)
class Fired:
    """The run a fire recorded, and its events when publishing them was left to its dispatch."""

    run_id: uuid.UUID
    conversation_id: uuid.UUID
    frames: list[EventFrame]


def task_fire(*, task_id: uuid.UUID, intended_at: datetime | None = None, publish: bool = True) -> Fired | None:
    """Take a fire of the occurrence a task is armed at; return the run to dispatch, if one is to run.

    Only an active, enabled task of an active conversation whose armed occurrence is due
    (or `intended_at`, when given) is taken, once: the claim moves `armed_at` on, so a
    duplicate or stale fire changes nothing. The next occurrence is armed in the same
    transaction. The occurrence's identity is the task, its version and the instant.
    Without `publish`, the run's events come back for its dispatch to publish with its own.
    """
    with transaction.atomic():
        task = Task.objects.select_for_update(of=("self",)).select_related("conversation").filter(id=task_id).first()
        now = timezone.now()
        if (
            task is None
            or task.state != TaskState.ACTIVE
            or not task.enabled
            or task.armed_at is None
            or task.armed_at > now + EARLY
            or (intended_at is not None and task.armed_at != intended_at)
            or task.conversation is None
            or task.conversation.state != ConversationState.ACTIVE
        ):
            return None
        intended_at = task.armed_at
        version = task.version
        to_run: datetime | None = intended_at
        missed = 0
        if task.schedule_kind == ScheduleKind.ONCE:
            task.consumed = True  # an overdue one-off runs once, however late
        else:
            # The armed instant counts as an occurrence, with those after it that passed by now.
            later, count = occurrences_between(task_schedule(task), first=intended_at + timedelta(seconds=1), until=now)
            latest = later[-1] if later else intended_at
            to_run = latest if now - latest <= GRACE else None
            missed = count + 1 - (1 if to_run is not None else 0)
        frames: list[EventFrame] = []
        if missed:
            _, missed_frames = _new_run(
                task,
                occurrence=occurrence_scheduled(task.id, version, intended_at),
                source=RunSource.SCHEDULED,
                intended_at=intended_at,
                status=RunStatus.MISSED,
                missed=missed,
            )
            frames += missed_frames
        run = None
        if to_run is not None:
            run, run_frames = _new_run(
                task,
                occurrence=occurrence_scheduled(task.id, version, to_run),
                source=RunSource.SCHEDULED,
                intended_at=to_run,
            )
            frames += run_frames
        schedule_arm(task, after=now)
        task.save(update_fields=["consumed", "armed_at", "periodic_task", "scheduling_error", "updated_at"])
        conversation_id = task.conversation.id
        if run is None or publish:
            events_publish_after_commit(conversation_id=conversation_id, frames=frames)
            frames = []
        return Fired(run.id, conversation_id, frames) if run is not None else None


def run_now(*, task_id: uuid.UUID, request_id: uuid.UUID, conversation_id: uuid.UUID | None = None) -> TaskRun:
    """Record a run the owner asked for (a disabled task's too); the same request id returns the same run.

    It neither consumes nor shifts the schedule. The caller dispatches it after commit.
    """
    occurrence = occurrence_manual(task_id, request_id)
    with transaction.atomic():
        task = task_get(task_id=task_id, conversation_id=conversation_id, locked=True)
        existing = TaskRun.objects.filter(occurrence=occurrence).first()
        if existing is not None:
            return existing
        run, frames = _new_run(task, occurrence=occurrence, source=RunSource.MANUAL, intended_at=timezone.now())
        events_publish_after_commit(conversation_id=run.conversation_id, frames=frames)
        return run


def task_run_now(*, task_id: uuid.UUID, request_id: uuid.UUID, conversation_id: uuid.UUID | None = None) -> TaskRun:
    """Run a task now (outside any transaction): record the run, then dispatch it; replays return it as it is."""
    run = run_now(task_id=task_id, request_id=request_id, conversation_id=conversation_id)
    if run.status == RunStatus.PENDING and run.turn_id is None:
        run = run_dispatch_try(run_id=run.id) or run
    return run


def run_dispatch_try(*, run_id: uuid.UUID, attempt: int = 1, fired: Fired | None = None) -> TaskRun | None:
    """Try a run's dispatch, with the events of the fire that recorded it; the job tries again (DISPATCH_TRIES)."""
    try:
        return run_dispatch(run_id=run_id, unpublished=fired.frames if fired is not None else None)
    except Exception:
        if fired is not None:
            events_publish_sync(conversation_id=fired.conversation_id, frames=fired.frames)
        if attempt >= DISPATCH_TRIES:
            logger.warning("dispatch of task run %s failed %d times; reconciliation may try once more", run_id, attempt)
            return None
        logger.warning("dispatch of task run %s failed; trying again", run_id, exc_info=True)
        current_app.send_task(DISPATCH_JOB, [str(run_id)], {"attempt": attempt + 1}, countdown=RETRY_SECONDS)
        return None


def _discard(run: TaskRun, status: str, code: str, *, before: list[EventFrame] | None = None) -> None:
    TaskRun.objects.filter(id=run.id).update(status=status, error_code=code, updated_at=timezone.now())
    run.status, run.error_code = status, code
    _announce(run, before=before)


def run_dispatch(*, run_id: uuid.UUID, unpublished: list[EventFrame] | None = None) -> TaskRun | None:
    """Submit a pending run's turn, if its task still wants it; return the run (None if it is gone).

    `unpublished`: events of the run's fire, published together with the dispatch's own
    (one publication per run). A database error propagates: the job tries again (the
    turn's request id makes the retry find the same turn).
    """
    earlier = list(unpublished or [])
    task_id = TaskRun.objects.filter(id=run_id).values_list("task_id", flat=True).first()
    if task_id is None:
        return None
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(id=task_id).first()
        run = TaskRun.objects.select_for_update().filter(id=run_id).first()
        if task is None or run is None:
            return None
        if run.status != RunStatus.PENDING or run.turn_id is not None:
            events_publish_after_commit(conversation_id=run.conversation_id, frames=earlier)
            return run
        if (
            task.state != TaskState.ACTIVE
            or task.version != run.task_version
            or (run.source == RunSource.SCHEDULED and not task.enabled)
        ):
            _discard(run, RunStatus.CANCELLED, "task_changed", before=earlier)
            return run
        source = {"kind": "task", "task_id": str(task.id), "run_id": str(run.id), "name": task.name}
        try:
            submitted = turn_submit_unpublished(
                conversation_id=run.conversation_id, request_id=run.request_id, text=task.instructions, source=source
            )
        except NotFound:
            _discard(run, RunStatus.CANCELLED, "conversation_deleted", before=earlier)
            return run
        run.turn_id = submitted.turn.id
        TaskRun.objects.filter(id=run.id).update(
            turn_id=run.turn_id, dispatch_attempts=run.dispatch_attempts + 1, updated_at=timezone.now()
        )
        # The fire's events, turn.queued, then the run with its turn: one publication.
        _announce(run, before=[*earlier, *submitted.frames])
        return run


def run_fail_dispatch(*, run_id: uuid.UUID) -> None:
    """Seal a run whose dispatch never got through: failed, and never dispatched again."""
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().filter(id=run_id, status=RunStatus.PENDING, turn_id=None).first()
        if run is not None:
            _discard(run, RunStatus.FAILED, "dispatch_failed")


def _project(run_id: uuid.UUID, observed: str) -> bool:
    """Move a run to what its turn shows, only forward; return whether it changed."""
    with transaction.atomic():
        run = TaskRun.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            return False
        status = status_after(run.status, observed)
        if status == run.status:
            return False
        TaskRun.objects.filter(id=run.id).update(status=status, updated_at=timezone.now())
        run.status = status
        _announce(run)
        return True


def runs_project_turn(*, turn_id: uuid.UUID, status: str) -> None:
    """Project a turn's new status onto the run that started it, if a run did."""
    runs = TaskRun.objects.filter(turn_id=turn_id, status__in=UNFINISHED_RUN_STATUSES)
    for run_id in runs.values_list("id", flat=True):
        _project(run_id, TURN_TO_RUN[status])


def on_turn_ended(*, turn_id: uuid.UUID, status: str, **kwargs: object) -> None:
    """`conversations.signals.turn_ended`: project the run after the turn's end commits."""

    def project() -> None:
        try:
            runs_project_turn(turn_id=turn_id, status=status)
        except Exception:
            # Reconciliation projects it within its period.
            logger.warning("could not project the end of turn %s onto its task run", turn_id, exc_info=True)

    transaction.on_commit(project)


def runs_cancel_unfinished(*, task: Task) -> None:
    """Stop a locked task's own pending and running runs: their turns, and the runs not yet dispatched."""
    # In turn-id order, as a batch of turn ends locks them: the two never wait on each other.
    runs = TaskRun.objects.select_for_update().filter(task=task, status__in=UNFINISHED_RUN_STATUSES)
    for run in runs.order_by("turn_id"):
        if run.turn_id is None:
            _discard(run, RunStatus.CANCELLED, "task_changed")
        elif not turn_cancel_one(turn_id=run.turn_id):
            # It had ended: project its end now rather than wait for reconciliation.
            status = Turn.objects.filter(id=run.turn_id).values_list("status", flat=True).first()
            if status is not None:
                _project(run.id, TURN_TO_RUN[status])


def tasks_reconcile() -> dict[str, int]:
    """Repair what a lost message or a crash left: projections, dispatches, fires and schedules."""
    now = timezone.now()
    done = {"projected": 0, "dispatched": 0, "failed": 0, "fired": 0, "rearmed": 0, "retired": 0}
    unfinished = list(
        TaskRun.objects.filter(status__in=UNFINISHED_RUN_STATUSES).order_by("created_at")[:RECONCILE_BATCH]
    )
    turns = dict(Turn.objects.filter(id__in=[r.turn_id for r in unfinished if r.turn_id]).values_list("id", "status"))
    for run in unfinished:
        if run.turn_id is not None:
            status = turns.get(run.turn_id)
            if status is None:
                done["projected"] += _project(run.id, RunStatus.CANCELLED)  # its turn is gone
            elif status_after(run.status, TURN_TO_RUN[status]) != run.status:
                done["projected"] += _project(run.id, TURN_TO_RUN[status])
        elif run.created_at <= now - RECOVERY_AFTER:
            if run.recovery_used:
                run_fail_dispatch(run_id=run.id)
                done["failed"] += 1
                continue
            TaskRun.objects.filter(id=run.id).update(recovery_used=True)
            try:
                run_dispatch(run_id=run.id)
                done["dispatched"] += 1
            except Exception:
                logger.warning("reconciliation could not dispatch task run %s", run.id, exc_info=True)
                run_fail_dispatch(run_id=run.id)
                done["failed"] += 1
    overdue = Task.objects.filter(
        state=TaskState.ACTIVE, enabled=True, armed_at__lte=now - LOST_FIRE_AFTER
    ).values_list("id", "armed_at")[:RECONCILE_BATCH]
    for task_id, armed_at in list(overdue):
        fired = task_fire(task_id=task_id, intended_at=armed_at)
        done["fired"] += 1
        if fired is not None:
            try:
                run_dispatch(run_id=fired.run_id)
            except Exception:
                logger.warning("reconciliation could not dispatch task run %s", fired.run_id, exc_info=True)
    for task_id in list(_schedules_astray()[:RECONCILE_BATCH]):
        with transaction.atomic():
            task = Task.objects.select_for_update().filter(id=task_id).first()
            if task is None:
                continue
            if task.state == TaskState.ACTIVE and task.enabled and not task.consumed:
                schedule_rearm(task, now=now)
            else:
                schedule_disarm(task)
            task.save(update_fields=["armed_at", "periodic_task", "scheduling_error", "updated_at"])
            done["rearmed"] += 1
    done["retired"] = schedules_retire()
    schedules_nearing()
    return done


def _schedules_astray() -> QuerySet[Task, uuid.UUID]:
    """Tasks whose beat row is not what the task says: missing, disabled or at another time while armed,
    or enabled while nothing is armed (a write of beat's own undid a disarm)."""
    wants = Q(state=TaskState.ACTIVE, enabled=True, consumed=False)
    armed_wrong = wants & (
        Q(periodic_task__isnull=True)
        | Q(periodic_task__enabled=False)
        | Q(armed_at__isnull=True)
        | ~Q(periodic_task__clocked__clocked_time=F("armed_at"))
    )
    stray = ~wants & Q(periodic_task__enabled=True)
    return Task.objects.filter(armed_wrong | stray).values_list("id", flat=True)
