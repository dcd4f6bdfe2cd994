"""System checks of the core: settings that the owner-session rules depend on."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

DATABASE_SESSIONS = "django.contrib.sessions.backends.db"


@checks.register(checks.Tags.security)
def session_engine_check(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Sockets re-check their session by reading Django's session table (`core.sql`): only that engine."""
    if settings.SESSION_ENGINE == DATABASE_SESSIONS:
        return []
    return [
        checks.Error(
            f"SESSION_ENGINE must be {DATABASE_SESSIONS!r}: open sockets re-check their session in its table.",
            hint="Remove the SESSION_ENGINE override.",
            id="core.E001",
        )
    ]
