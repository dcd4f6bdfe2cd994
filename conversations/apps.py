from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    """Conversations, transcript, turns, the event log, the turn engine and the chat socket."""

    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations.browser_tasks.propose import BROWSER_TASK_PROPOSE
        from tools.registry import tools_register

        tools_register([BROWSER_TASK_PROPOSE])
