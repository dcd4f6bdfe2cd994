"""OpenAPI description of the owner's session, for the schema at /api/schema/."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension


class OwnerSessionScheme(OpenApiAuthenticationExtension):
    target_class = "flarebot.core.api_auth.OwnerSessionAuthentication"
    name = "ownerSession"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME}
