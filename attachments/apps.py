from django.apps import AppConfig


class AttachmentsConfig(AppConfig):
    """Files the owner attaches to messages: their rows, their blobs, serving them and the read_attachment tool."""

    name = "attachments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from attachments.tools import TOOLS
        from tools.registry import tools_register

        tools_register(TOOLS)
