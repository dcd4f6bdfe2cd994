"""DRF authentication and permission for the owner's session.

Kept apart from `flarebot.core.api` because DRF imports these classes while it is still
importing `rest_framework.views`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from flarebot.core.sessions import SessionState, owner_session_state

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class OwnerSessionAuthentication(BaseAuthentication):
    """Accept the owner's session; the middleware has already refused everything else.

    No CSRF token is asked for: unsafe methods must carry the exact Origin (checked by
    OriginGuardMiddleware) and the cookie is SameSite=Lax.
    """

    def authenticate(self, request: Request) -> tuple[Any, None] | None:
        django_request = request._request
        installation = getattr(django_request, "flarebot_installation", None)
        user = getattr(django_request, "user", None)
        if installation is None or user is None:
            return None
        state = owner_session_state(session=django_request.session, user=user, installation=installation)
        return (user, None) if state is SessionState.VALID else None

    def authenticate_header(self, request: Request) -> str:
        return 'Session realm="flarebot"'


class IsOwner(BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return request.user is not None
