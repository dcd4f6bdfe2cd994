"""Conversations: the owner's separate threads with Flarebot."""

from __future__ import annotations

from django.db import models

from flarebot.core.models import BaseModel


class ConversationState(models.TextChoices):
    ACTIVE = "active", "Active"
    # Inaccessible to every route and socket; its data is being torn down.
    DELETING = "deleting", "Deleting"


class Conversation(BaseModel):
    """One conversation. `updated_at` tracks its display metadata, not message activity."""

    name = models.CharField(max_length=120)
    state = models.CharField(max_length=16, choices=ConversationState.choices, default=ConversationState.ACTIVE)
    deletion_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=ConversationState.values), name="conv_conversation_state_valid"
            ),
        ]
        indexes = [
            # conversation_list: active conversations, newest updated_at first, then id
            models.Index(fields=["state", "-updated_at", "id"], name="conv_conversation_list"),
        ]

    def __str__(self) -> str:
        return self.name
