"""The Django admin, open to the installation's owner only, signed in through /login/."""

from __future__ import annotations

from django.contrib.admin import AdminSite
from django.http import HttpRequest

from flarebot.core.sessions import SessionState, owner_session_state


class OwnerAdminSite(AdminSite):
    site_header = "Flarebot administration"
    site_title = "Flarebot admin"
    login_template = None

    def has_permission(self, request: HttpRequest) -> bool:
        installation = getattr(request, "flarebot_installation", None)
        if installation is None:
            return False
        state = owner_session_state(session=request.session, user=request.user, installation=installation)
        return state is SessionState.VALID


class ReadOnlyAdminMixin:
    """Show rows without letting the admin add, change or delete them."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
