from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """Explicit memory facts, their search and the memory tools."""

    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"
