from django.apps import AppConfig


class ToolsConfig(AppConfig):
    """Tool registry, tool activity, network policy and the web/browser/shell tools."""

    name = "tools"
    default_auto_field = "django.db.models.BigAutoField"
