"""Reads of tasks: the contract's `T` and `R`, the list, one task, a page of its runs.

A run's status is projected from its turn when it is read (a run still pending or running
shows what its turn does now); the stored status follows through `runs_project_turn` and
reconciliation. A task whose conversation is being deleted is already gone to every
reader here, before its tombstone is written.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from django.db.models import QuerySet
from django.utils import timezone

from conversations.models import ConversationState, Turn
from flarebot.core.pages import page_newest_first
from flarebot.core.times import iso
from tasks.arming import task_schedule
from tasks.errors import TaskNotFound
from tasks.events import RunJson
from tasks.models import UNFINISHED_RUN_STATUSES, RunStatus, Task, TaskRun, TaskState
from tasks.schedule import instant_text, upcoming
from tasks.words import schedule_words

RUNS_DEFAULT = 25
RUNS_MAX = 100
# A turn's status as a run's.
TURN_TO_RUN = {
    "queued": RunStatus.PENDING,
    "running": RunStatus.RUNNING,
    "completed": RunStatus.COMPLETED,
    "failed": RunStatus.FAILED,
    "cancelled": RunStatus.CANCELLED,
}
_RANK = {RunStatus.PENDING: 0, RunStatus.RUNNING: 1}


def status_after(current: str, observed: str) -> str:
    """The status a run moves to when its turn is seen at `observed`: only ever forward."""
    if _RANK.get(current, 2) < _RANK.get(observed, 2):  # type: ignore[call-overload]
        return observed
    return current


class TaskJson(TypedDict):
    id: str
    conversation_id: str | None
    name: str
    instructions: str
    schedule: dict[str, Any]
    schedule_text: str
    enabled: bool
    notify_on_completion: bool
    version: int
    next_run_at: str | None
    upcoming: list[str]
    previous_run: RunJson | None
    scheduling_error: str | None
    created_at: str | None
    updated_at: str | None


def run_view(run: TaskRun, *, turn_status: str | None = None) -> RunJson:
    """Return a run as the contract's `R` (with the status its turn shows, when given)."""
    status = run.status
    if turn_status is not None:
        status = status_after(status, TURN_TO_RUN[turn_status])
    return {
        "id": str(run.id),
        "source": run.source,
        "intended_at": instant_text(run.intended_at),
        "status": status,
        "turn_id": str(run.turn_id) if run.turn_id else None,
        "conversation_id": str(run.conversation_id),
        "missed_count": run.missed_count,
        "created_at": iso(run.created_at),
    }


def _turn_statuses(runs: list[TaskRun]) -> dict[uuid.UUID, str]:
    ids = [run.turn_id for run in runs if run.turn_id is not None and run.status in UNFINISHED_RUN_STATUSES]
    if not ids:
        return {}
    return dict(Turn.objects.filter(id__in=ids).values_list("id", "status"))


def runs_view(runs: list[TaskRun]) -> list[RunJson]:
    statuses = _turn_statuses(runs)
    return [run_view(run, turn_status=statuses.get(run.turn_id) if run.turn_id else None) for run in runs]


def _next_run_at(task: Task) -> datetime | None:
    """When beat will fire the task: the time of the clocked schedule it holds, if enabled."""
    periodic = task.periodic_task
    if task.armed_at is None or periodic is None or not periodic.enabled or periodic.clocked is None:
        return None
    return periodic.clocked.clocked_time


def task_view(task: Task, *, previous: TaskRun | bool | None = False) -> TaskJson:
    """Return a task as the contract's `T`; `previous` is its latest run when the caller has it."""
    next_at = _next_run_at(task)
    schedule = task_schedule(task)
    shown: list[datetime] = []
    if task.enabled and not task.consumed:
        start = next_at or timezone.now()
        shown = upcoming(schedule, start=start)
    if previous is False:
        previous = task.runs.order_by("-created_at", "-id").first()
    return {
        "id": str(task.id),
        "conversation_id": str(task.conversation_id) if task.conversation_id else None,
        "name": task.name,
        "instructions": task.instructions,
        "schedule": schedule.as_json(),
        "schedule_text": schedule_words(schedule),
        "enabled": task.enabled,
        "notify_on_completion": task.notify_on_completion,
        "version": task.version,
        "next_run_at": instant_text(next_at) if next_at else None,
        "upcoming": [instant_text(at) for at in shown],
        "previous_run": runs_view([previous])[0] if isinstance(previous, TaskRun) else None,
        "scheduling_error": task.scheduling_error or None,
        "created_at": iso(task.created_at),
        "updated_at": iso(task.updated_at),
    }


def _active() -> QuerySet[Task]:
    """Active tasks of active conversations: the only ones any reader or writer sees."""
    return Task.objects.filter(state=TaskState.ACTIVE, conversation__state=ConversationState.ACTIVE)


def _visible() -> QuerySet[Task]:
    return _active().select_related("periodic_task__clocked")


def task_list(*, conversation_id: uuid.UUID | None = None) -> list[Task]:
    """Return the active tasks (of one conversation, when given), newest first."""
    tasks = _visible()
    if conversation_id is not None:
        tasks = tasks.filter(conversation_id=conversation_id)
    return list(tasks.order_by("-created_at", "-id"))


def task_get(*, task_id: uuid.UUID, conversation_id: uuid.UUID | None = None, locked: bool = False) -> Task:
    """Return an active task (of this conversation, when given), or TaskNotFound; `locked` locks its row till commit."""
    tasks = (_active().select_for_update() if locked else _visible()).filter(id=task_id)
    if conversation_id is not None:
        tasks = tasks.filter(conversation_id=conversation_id)
    task = tasks.first()
    if task is None:
        raise TaskNotFound()
    return task


def tasks_views(tasks: list[Task]) -> list[TaskJson]:
    """Return tasks as `T`, reading each one's latest run in one query."""
    latest: dict[uuid.UUID, TaskRun] = {}
    if tasks:
        # Newest first: the first run seen for a task is its latest.
        for run in TaskRun.objects.filter(task_id__in=[t.id for t in tasks]).order_by("-created_at", "-id"):
            latest.setdefault(run.task_id, run)
    return [task_view(task, previous=latest.get(task.id)) for task in tasks]


@dataclass(frozen=True)
class RunPage:
    runs: list[RunJson]
    next_cursor: str | None


def run_page(*, task_id: uuid.UUID, limit: int, before: str | None) -> RunPage:
    """Return up to `limit` runs of an active task, newest first (creation time, then id), before the cursor."""
    task_get(task_id=task_id)
    page, next_cursor = page_newest_first(TaskRun.objects.filter(task_id=task_id), limit=limit, before=before)
    return RunPage(runs_view(page), next_cursor)
