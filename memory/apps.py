from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """Explicit memory facts, their search and the memory tools."""

    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory.tools import memory_tools_register

        memory_tools_register()
