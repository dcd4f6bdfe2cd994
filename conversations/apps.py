from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    """Conversations, transcript, turns, the event log, the turn engine and the chat socket."""

    name = "conversations"
    default_auto_field = "django.db.models.BigAutoField"
