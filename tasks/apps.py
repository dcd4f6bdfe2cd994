from django.apps import AppConfig


class TasksConfig(AppConfig):
    """Scheduled tasks, their occurrences and run history."""

    name = "tasks"
    default_auto_field = "django.db.models.BigAutoField"
