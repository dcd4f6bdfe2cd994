"""Scheduled tasks, the schedule beat holds for each, and their run history.

A task targets one conversation and has a schedule. Beat holds its next occurrence as a
django-celery-beat `PeriodicTask` with its own `ClockedSchedule`, kept for the task's life
(`tasks.arming` says why). `armed_at` is the occurrence the task expects a fire for; a fire
takes it once, and any other fire finds nothing due.

Each occurrence that was run or missed is a `TaskRun` whose `occurrence` is unique: the
task, its version and the intended instant (or, for a run the owner asked for, the
task and the owner's request id). The row is written before its turn is submitted, and
the turn's `request_id` is derived from it, so no occurrence runs twice.

Deleting a task keeps a tombstone (id and version, no content, no history), so that a
retried creation can never bring it back.
"""

from __future__ import annotations

from django.db import models
from django_celery_beat.models import PeriodicTask

from conversations.models import Conversation
from flarebot.core.models import BaseModel


class TaskState(models.TextChoices):
    ACTIVE = "active", "Active"
    DELETED = "deleted", "Deleted"


class ScheduleKind(models.TextChoices):
    ONCE = "once", "Once"
    CRON = "cron", "Cron"


class Task(BaseModel):
    # Immutable; emptied for a tombstone (the conversation may be gone).
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    name = models.CharField(max_length=120, blank=True, default="")
    instructions = models.TextField(blank=True, default="")
    schedule_kind = models.CharField(max_length=8, choices=ScheduleKind.choices, blank=True, default="")
    once_at = models.DateTimeField(null=True, blank=True)
    cron_expression = models.CharField(max_length=120, blank=True, default="")
    timezone = models.CharField(max_length=64, blank=True, default="")
    enabled = models.BooleanField(default=True)
    # "Notify me": a completed run of this task tells the owner (notifications), whatever the kind's switch says.
    notify_on_completion = models.BooleanField(default=False)
    version = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=16, choices=TaskState.choices, default=TaskState.ACTIVE)
    # A one-off whose occurrence was run (or missed): it stays done until given a new instant.
    consumed = models.BooleanField(default=False)
    # SHA-256 of the normalized creation request: a retry that matches returns the task.
    creation_hash = models.CharField(max_length=64, blank=True, default="")
    # The occurrence beat holds for this task (None: nothing armed).
    armed_at = models.DateTimeField(null=True, blank=True)
    periodic_task = models.OneToOneField(
        PeriodicTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="flarebot_task"
    )
    scheduling_error = models.CharField(max_length=64, blank=True, default="")
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(state__in=TaskState.values), name="tasks_task_state_valid"),
            models.CheckConstraint(
                condition=models.Q(schedule_kind__in=[*ScheduleKind.values, ""]), name="tasks_task_kind_valid"
            ),
            models.CheckConstraint(condition=models.Q(version__gte=1), name="tasks_task_version_positive"),
            # A tombstone keeps no content.
            models.CheckConstraint(
                condition=models.Q(state=TaskState.ACTIVE, deleted_at__isnull=True)
                | models.Q(state=TaskState.DELETED, deleted_at__isnull=False, name="", instructions=""),
                name="tasks_task_tombstone_shape",
            ),
        ]
        indexes = [
            # task_list and the limit's count: active tasks, newest first
            models.Index(fields=["state", "-created_at", "id"], name="tasks_task_list"),
            # tasks_tombstone_for_conversation (a deleted conversation), task_list of a conversation (the tools)
            models.Index(fields=["conversation", "state"], name="tasks_task_conversation"),
            # tasks_reconcile: armed tasks whose fire is overdue or whose schedule is missing
            models.Index(fields=["state", "armed_at"], name="tasks_task_armed"),
        ]

    def __str__(self) -> str:
        return f"task {self.id} (deleted)" if self.state == TaskState.DELETED else f"task {self.name}"


class RunSource(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"
    MANUAL = "manual", "Manual"


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    MISSED = "missed", "Missed"


UNFINISHED_RUN_STATUSES = (RunStatus.PENDING, RunStatus.RUNNING)
TERMINAL_RUN_STATUSES = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.MISSED)


class TaskRun(BaseModel):
    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="runs", db_index=False)
    # "s:<task>:<version>:<intended instant>" or "m:<task>:<request id>": one run per occurrence.
    occurrence = models.CharField(max_length=200, unique=True)
    source = models.CharField(max_length=16, choices=RunSource.choices)
    intended_at = models.DateTimeField()
    task_version = models.PositiveIntegerField()
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.PENDING)
    # The turn's request id, derived from the occurrence: a retried dispatch finds its turn.
    request_id = models.UUIDField()
    turn_id = models.UUIDField(null=True, blank=True)
    conversation_id = models.UUIDField()
    # Occurrences a missed run stands for (1 for the others).
    missed_count = models.PositiveIntegerField(default=1)
    dispatch_attempts = models.PositiveIntegerField(default=0)
    # Reconciliation's one further dispatch of a run whose dispatch never got through.
    recovery_used = models.BooleanField(default=False)
    error_code = models.CharField(max_length=64, blank=True, default="")
    # When the owner saw this failed or missed run (task_runs_seen: the Tasks page opened).
    seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(status__in=RunStatus.values), name="tasks_run_status_valid"),
            models.CheckConstraint(condition=models.Q(source__in=RunSource.values), name="tasks_run_source_valid"),
        ]
        indexes = [
            # run_page and task_view (its previous run): a task's runs, newest first (keyset on created_at, id)
            models.Index(fields=["task", "-created_at", "-id"], name="tasks_run_history"),
            # tasks_reconcile, attention_items: runs by status (unfinished; failed and missed, newest first)
            models.Index(fields=["status", "created_at"], name="tasks_run_unfinished"),
            # runs_project_turn: the run of a turn
            models.Index(fields=["turn_id"], name="tasks_run_turn"),
        ]
