from django.apps import AppConfig


class SettingsUiConfig(AppConfig):
    """Server-rendered pages: sign-in, chat and settings."""

    name = "settings_ui"
    default_auto_field = "django.db.models.BigAutoField"
