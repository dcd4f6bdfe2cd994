"""Tasks and their runs in the admin, read-only: every change goes through the versioned services.

Beat's own rows (`PeriodicTask` "flarebot task <id>", `ClockedSchedule`) are in
django-celery-beat's admin; they are re-armed from the tasks, so edit the task instead.
"""

from __future__ import annotations

from django.contrib import admin

from flarebot.core.admin_site import ReadOnlyAdminMixin
from tasks.models import Task, TaskRun, TaskState


@admin.register(Task)
class TaskAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "shown_name", "state", "enabled", "schedule_kind", "armed_at", "version", "updated_at")
    list_filter = ("state", "enabled", "schedule_kind")
    fields = (
        "id",
        "state",
        "conversation",
        "name",
        "schedule_kind",
        "once_at",
        "cron_expression",
        "timezone",
        "enabled",
        "consumed",
        "version",
        "armed_at",
        "periodic_task",
        "scheduling_error",
        "created_at",
        "updated_at",
        "deleted_at",
    )
    readonly_fields = fields
    ordering = ("-created_at",)

    @admin.display(description="name")
    def shown_name(self, task: Task) -> str:
        return "(deleted: a tombstone without content)" if task.state == TaskState.DELETED else task.name


@admin.register(TaskRun)
class TaskRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "task", "source", "status", "intended_at", "missed_count", "turn_id", "created_at")
    list_filter = ("status", "source")
    fields = (
        "id",
        "task",
        "occurrence",
        "source",
        "status",
        "intended_at",
        "task_version",
        "missed_count",
        "request_id",
        "turn_id",
        "conversation_id",
        "dispatch_attempts",
        "recovery_used",
        "error_code",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    ordering = ("-created_at",)
