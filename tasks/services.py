"""Writes of task definitions: create, update, delete, and the tombstoning of a deleted conversation's tasks.

Every input is checked and normalized before a row is touched; what is refused is said in
words, with the field it is about beside the message (`tasks.errors.FieldInvalid`). A task
may be created together with a new conversation named after it, in one transaction: a
refused task leaves no conversation behind. Creation is idempotent by the client's id: a
retry of the same normalized request returns the task as it is now, even after edits, and
any other reuse of the id is a conflict. Updates and deletes compare the version the
caller read. Each change re-arms the task's schedule and cancels
its own unfinished runs (their turns, nobody else's) in the same transaction that holds
the task's row, so a dispatch, which holds it too, sees either the old task or the new.

Locks are taken in one order everywhere: the task, its runs, then turns and the
conversation (through the turn services).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from conversations.errors import ConversationNotFound
from conversations.eventlog import owner_changed_send
from conversations.models import Conversation, ConversationState
from conversations.services import conversation_create
from flarebot.core.rows import transaction_lock
from flarebot.core.text import (
    has_control_characters,
    has_disguising_characters,
    has_lone_surrogates,
    line_breaks_normalize,
    utf16_length,
)
from tasks.arming import schedule_arm, schedule_disarm
from tasks.errors import (
    ScheduleInvalid,
    TaskConflict,
    TaskIdConflict,
    TaskInvalid,
    TasksFull,
)
from tasks.events import tasks_changed_send
from tasks.models import RunStatus, ScheduleKind, Task, TaskRun, TaskState
from tasks.runs import runs_cancel_unfinished
from tasks.schedule import Schedule, schedule_parse
from tasks.selectors import task_get, task_view

MAX_TASKS = 100  # active tasks; tombstones do not count
NAME_MAX = 120  # UTF-16 code units
INSTRUCTIONS_MAX = 8_000
# Held by every creation until its transaction ends, so that the count under MAX_TASKS holds.
TASKS_ADD_LOCK = "tasks:tasks-add"


@dataclass(frozen=True)
class TaskInput:
    """A task's editable fields, checked and normalized."""

    name: str
    instructions: str
    schedule: Schedule
    enabled: bool
    # "Notify me" when a run completes (an addition to `T`); None: as it is (a new task: off).
    notify_on_completion: bool | None = None


def name_clean(raw: str) -> str:
    """Check a task's name (1-120 UTF-16 code units, no control or invisible characters) and trim it."""
    if not 1 <= utf16_length(raw) <= NAME_MAX:
        raise TaskInvalid(f"The name must be 1-{NAME_MAX} characters long.", field="name")
    if has_control_characters(raw) or has_disguising_characters(raw) or has_lone_surrogates(raw):
        raise TaskInvalid(
            "The name must not contain control characters, direction controls or invisible characters.", field="name"
        )
    if not raw.strip():
        raise TaskInvalid("The name must not be blank.", field="name")
    return raw.strip()


def instructions_clean(raw: str) -> str:
    """Check a task's instructions: 1-8,000 UTF-16 code units, tabs and line breaks the only controls."""
    raw = line_breaks_normalize(raw)
    field = "instructions"
    if utf16_length(raw) > INSTRUCTIONS_MAX:
        raise TaskInvalid(
            f"The instructions may be at most {INSTRUCTIONS_MAX:,} characters (UTF-16 code units) long.", field=field
        )
    if has_control_characters(raw, allow="\n\t") or has_lone_surrogates(raw):
        raise TaskInvalid("The instructions may hold no control characters but tabs and line breaks.", field=field)
    if not raw.strip():
        raise TaskInvalid("The instructions must not be blank.", field=field)
    return raw


def task_input_clean(
    *, name: Any, instructions: Any, schedule: Any, enabled: Any, notify_on_completion: Any = None
) -> TaskInput:
    """Check and normalize a task's editable fields (the API and the tools share this)."""
    if not isinstance(name, str):
        raise TaskInvalid("The name must be a string.", field="name")
    if not isinstance(instructions, str):
        raise TaskInvalid("The instructions must be a string.", field="instructions")
    if type(enabled) is not bool:
        raise TaskInvalid("Whether the task is enabled must be true or false.", field="enabled")
    if notify_on_completion is not None and type(notify_on_completion) is not bool:
        raise TaskInvalid("Whether a completed run notifies you must be true or false.", field="notify_on_completion")
    return TaskInput(
        name_clean(name), instructions_clean(instructions), schedule_parse(schedule), enabled, notify_on_completion
    )


def _creation_hash(conversation_id: uuid.UUID | None, data: TaskInput) -> str:
    schedule = data.schedule.as_json()
    if schedule["kind"] == "once" and schedule["timezone"] == "UTC":
        # Hashed as before one-offs kept a zone, so a retry across that upgrade still matches.
        del schedule["timezone"]
    document: dict[str, Any] = {
        "name": data.name,
        "instructions": data.instructions,
        "schedule": schedule,
        "enabled": data.enabled,
    }
    if data.notify_on_completion:
        # Only when on, so that a request from before the switch existed hashes as it did.
        document["notify_on_completion"] = True
    if conversation_id is None:
        document["new_conversation"] = True
    else:
        document["conversation_id"] = str(conversation_id)
    return hashlib.sha256(json.dumps(document, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _future(schedule: Schedule, now: datetime) -> None:
    if schedule.kind == "once" and schedule.at is not None and schedule.at <= now:
        raise ScheduleInvalid("The time of a one-off must be in the future.", field="schedule.at")


def _apply(task: Task, data: TaskInput) -> None:
    task.name = data.name
    task.instructions = data.instructions
    task.enabled = data.enabled
    if data.notify_on_completion is not None:
        task.notify_on_completion = data.notify_on_completion
    task.schedule_kind = data.schedule.kind
    task.once_at = data.schedule.at
    task.cron_expression = data.schedule.expression
    task.timezone = data.schedule.timezone


def task_create(*, task_id: uuid.UUID, conversation_id: uuid.UUID | None, data: TaskInput) -> tuple[Task, bool]:
    """Create a task under the client's id; return it and whether it is new.

    Without `conversation_id`, a new conversation named after the task is created with it,
    in the same transaction. A retry of the same normalized request returns the task as it
    is now (and creates no second conversation); a deleted id or a different request under
    the same id is a conflict.
    """
    digest = _creation_hash(conversation_id, data)
    now = timezone.now()
    with transaction.atomic():
        transaction_lock(TASKS_ADD_LOCK)
        existing = Task.objects.select_for_update().filter(id=task_id).first()
        if existing is not None:
            if existing.state == TaskState.DELETED:
                raise TaskIdConflict("This id belonged to a task that was deleted; create the task with a new id.")
            if existing.creation_hash != digest:
                raise TaskIdConflict("This id belongs to another task; create the task with a new id.")
            return existing, False
        _future(data.schedule, now)
        if conversation_id is not None:
            # Locked until commit: a deletion of the conversation waits, then tombstones this task too.
            target = Conversation.objects.select_for_update().filter(id=conversation_id, state=ConversationState.ACTIVE)
            if target.only("id").first() is None:
                raise ConversationNotFound()
        if Task.objects.filter(state=TaskState.ACTIVE).count() >= MAX_TASKS:
            raise TasksFull(f"At most {MAX_TASKS} tasks; delete one to add another.")
        if conversation_id is None:
            # Last of the checks, inside the transaction: a task refused past here (an id taken
            # meanwhile) rolls the conversation back with it.
            conversation_id = conversation_create(name=data.name).id
        task = Task(id=task_id, conversation_id=conversation_id, creation_hash=digest)
        _apply(task, data)
        try:
            with transaction.atomic():
                task.save(force_insert=True)
        except IntegrityError:
            raise TaskIdConflict("This id is being used by another request; try again.") from None
        schedule_arm(task, after=now)
        task.save(update_fields=["armed_at", "periodic_task", "scheduling_error"])
        transaction.on_commit(tasks_changed_send)
        return task, True


def _stale(task: Task, expected_version: int) -> None:
    if task.version != expected_version:
        raise TaskConflict(
            f"This task was changed elsewhere: it is at version {task.version}, not {expected_version}.",
            current=task_view(task),
        )


def task_update(
    *,
    task_id: uuid.UUID,
    expected_version: int,
    name: Any,
    instructions: Any,
    schedule: Any,
    enabled: Any,
    conversation_id: uuid.UUID | None = None,
    notify_on_completion: Any = None,
) -> Task:
    """Replace a task's editable fields if it is still at `expected_version`; never creates a task.

    A one-off that ran stays done when its unchanged instant is sent back; a new instant
    (in the future) arms it again. The task's unfinished runs are cancelled.
    """
    data = task_input_clean(
        name=name,
        instructions=instructions,
        schedule=schedule,
        enabled=enabled,
        notify_on_completion=notify_on_completion,
    )
    now = timezone.now()
    with transaction.atomic():
        task = task_get(task_id=task_id, conversation_id=conversation_id, locked=True)
        _stale(task, expected_version)
        unchanged_once = (
            data.schedule.kind == "once"
            and task.schedule_kind == ScheduleKind.ONCE
            and data.schedule.at == task.once_at
        )
        if not unchanged_once:
            _future(data.schedule, now)
            task.consumed = False
        _apply(task, data)
        task.version += 1  # the row is locked
        task.save()
        runs_cancel_unfinished(task=task)
        schedule_arm(task, after=now)
        task.save(update_fields=["armed_at", "periodic_task", "scheduling_error"])
        transaction.on_commit(tasks_changed_send)
        return task


def _tombstone(task: Task) -> None:
    """Cancel a locked task's unfinished runs, erase its history and schedule, and keep only its id."""
    runs_cancel_unfinished(task=task)
    task.runs.all().delete()
    schedule_disarm(task)
    now = timezone.now()
    Task.objects.filter(id=task.id).update(
        state=TaskState.DELETED,
        deleted_at=now,
        updated_at=now,
        version=F("version") + 1,
        conversation=None,
        name="",
        instructions="",
        schedule_kind="",
        once_at=None,
        cron_expression="",
        timezone="",
        enabled=False,
        consumed=False,
        creation_hash="",
        armed_at=None,
        scheduling_error="",
    )  # the beat row stays linked, disabled, until reconciliation retires it
    transaction.on_commit(tasks_changed_send)


def task_delete(*, task_id: uuid.UUID, expected_version: int, conversation_id: uuid.UUID | None = None) -> bool:
    """Delete a task at `expected_version`, keeping a tombstone; return False when there was no active task.

    An id never used is reserved by a tombstone, so a creation still on its way cannot make it.
    """
    for _ in range(2):
        with transaction.atomic():
            task = Task.objects.select_for_update().filter(id=task_id).first()
            if task is None:
                if conversation_id is not None:
                    return False  # a tool may only delete its conversation's tasks
                try:
                    with transaction.atomic():
                        Task.objects.create(
                            id=task_id, state=TaskState.DELETED, deleted_at=timezone.now(), enabled=False
                        )
                except IntegrityError:
                    continue  # created meanwhile: look again
                return False
            if task.state == TaskState.DELETED:
                return False
            if conversation_id is not None and task.conversation_id != conversation_id:
                return False
            _stale(task, expected_version)
            _tombstone(task)
            return True
    return False


def tasks_tombstone_for_conversation(*, conversation_id: uuid.UUID) -> int:
    """Tombstone every task of a conversation being deleted; return how many (idempotent)."""
    count = 0
    ids = list(
        Task.objects.filter(conversation_id=conversation_id, state=TaskState.ACTIVE).values_list("id", flat=True)
    )
    for task_id in ids:
        with transaction.atomic():
            task = Task.objects.select_for_update().filter(id=task_id, state=TaskState.ACTIVE).first()
            if task is not None:
                _tombstone(task)
                count += 1
    return count


# The runs the needs-you list shows until the owner has seen them (settings_ui.selectors.attention_items).
RUNS_TO_SEE = (RunStatus.FAILED, RunStatus.MISSED)


def task_runs_seen() -> int:
    """Mark every failed or missed run seen (the owner opened the Tasks page); return how many were new."""
    seen = TaskRun.objects.filter(status__in=RUNS_TO_SEE, seen_at__isnull=True).update(seen_at=timezone.now())
    if seen:
        transaction.on_commit(lambda: owner_changed_send(conversation_id=None, attention=True))
    return seen
