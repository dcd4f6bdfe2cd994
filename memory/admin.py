"""Facts in the admin, read-only: every change goes through the versioned services."""

from __future__ import annotations

from django.contrib import admin

from flarebot.core.admin_site import ReadOnlyAdminMixin
from memory.models import Fact, FactState


@admin.register(Fact)
class FactAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "shown_content", "state", "version", "created_at", "updated_at", "deleted_at")
    list_filter = ("state",)
    search_fields = ("content",)
    fields = ("id", "state", "content", "version", "created_at", "updated_at", "deleted_at")
    readonly_fields = fields
    ordering = ("-created_at",)

    @admin.display(description="content")
    def shown_content(self, fact: Fact) -> str:
        if fact.state == FactState.DELETED:
            return "(deleted: a tombstone without content)"
        return fact.content if len(fact.content) <= 120 else fact.content[:119] + "…"
