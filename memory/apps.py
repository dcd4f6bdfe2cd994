from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """Explicit memory facts, their search and the memory tools."""

    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from memory.tools import TOOLS
        from tools.registry import tools_register

        tools_register(TOOLS)
