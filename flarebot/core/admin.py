"""Core rows in the admin, read-only: editing them would break the installation invariants."""

from __future__ import annotations

from django.contrib import admin

from flarebot.core.admin_site import ReadOnlyAdminMixin
from flarebot.core.models import Installation, SignInFailure


@admin.register(Installation)
class InstallationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("installation_id", "owner_username", "schema_version", "created_at")


@admin.register(SignInFailure)
class SignInFailureAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("client", "account", "created_at")
