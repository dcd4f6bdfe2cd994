"""App configs of the core: the installation, sign-in bookkeeping and the owner-only admin."""

from __future__ import annotations

from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class CoreConfig(AppConfig):
    default = True
    name = "flarebot.core"
    label = "core"
    verbose_name = "Flarebot core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The OpenAPI extensions (`flarebot.core.schema`) register when the API's views
        # import them: the workers and beat never load the API, DRF or drf-spectacular.
        from flarebot.core import (
            checks,  # noqa: F401  (registers the system checks)
            sessions,  # noqa: F401  (connects the receivers that close sockets)
        )


class FlarebotAdminConfig(admin_apps.AdminConfig):
    default = False
    default_site = "flarebot.core.admin_site.OwnerAdminSite"
