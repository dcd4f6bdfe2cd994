"""Conversations in the admin, read-only: deletion must go through the two-phase service."""

from __future__ import annotations

from django.contrib import admin

from conversations.models import Conversation
from flarebot.core.admin_site import ReadOnlyAdminMixin


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("name", "state", "created_at", "updated_at")
    list_filter = ("state",)
    search_fields = ("name",)
