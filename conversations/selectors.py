"""Reads of conversations. Deleting ones are invisible to every reader here."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from conversations.models import Conversation, ConversationState


def conversation_list() -> QuerySet[Conversation]:
    """Return active conversations, newest `updated_at` first, then by id."""
    return Conversation.objects.filter(state=ConversationState.ACTIVE).order_by("-updated_at", "id")


def conversation_get_active(*, conversation_id: uuid.UUID) -> Conversation | None:
    """Return the conversation if it exists and is not being deleted."""
    return Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE).first()
