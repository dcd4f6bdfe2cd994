from django.apps import AppConfig


class TasksConfig(AppConfig):
    """Scheduled tasks, their occurrences and run history, and the task tools."""

    name = "tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations.signals import conversation_torn_down, turn_ended
        from tasks.receivers import on_conversation_torn_down
        from tasks.runs import on_turn_ended
        from tasks.tools import TOOLS
        from tools.registry import tools_register

        conversation_torn_down.connect(on_conversation_torn_down, dispatch_uid="tasks.conversation_torn_down")
        turn_ended.connect(on_turn_ended, dispatch_uid="tasks.turn_ended")
        tools_register(TOOLS)
