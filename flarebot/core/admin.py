"""Core rows in the admin, read-only where editing them would break the installation invariants."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.http import HttpRequest

from flarebot.core.admin_site import ReadOnlyAdminMixin
from flarebot.core.models import Installation, SignInFailure


@admin.register(Installation)
class InstallationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("installation_id", "owner_username", "schema_version", "created_at")


@admin.register(SignInFailure)
class SignInFailureAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("client", "account", "created_at")


# What makes the owner's row the owner: a renamed or deactivated owner no longer matches
# the installation (every request then answers 503), and without staff and superuser
# flags the owner could no longer use this admin.
OWNER_IDENTITY_FIELDS = ("username", "is_active", "is_staff", "is_superuser")


class OwnerProtectingUserAdmin(UserAdmin):
    """Django's user admin, with the owner's identifying fields shown but not editable."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        readonly = tuple(super().get_readonly_fields(request, obj))
        if obj is not None and Installation.objects.filter(owner_id=obj.pk).exists():
            return readonly + tuple(f for f in OWNER_IDENTITY_FIELDS if f not in readonly)
        return readonly


admin.site.unregister(User)
admin.site.register(User, OwnerProtectingUserAdmin)
