"""Reads of conversations. Deleting ones are invisible to every reader here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from conversations import sql
from conversations.errors import ConversationNotFound
from conversations.models import (
    UNREAD_EVENT_KINDS,
    Conversation,
    ConversationState,
    Event,
    Message,
    MessageRole,
    ProviderKey,
    Turn,
)
from conversations.version_tree import Versions, transcript_versions


def conversations_unread(conversations: QuerySet[Conversation]) -> QuerySet[Conversation]:
    """Annotate each conversation with `unread`: the agent's messages after its read mark.

    One correlated count per listed conversation, over the partial index of the unread
    kinds only (a few events per turn, never its streamed text).
    """
    counted = (
        Event.objects.filter(
            conversation=OuterRef("pk"), sequence__gt=OuterRef("read_sequence"), kind__in=UNREAD_EVENT_KINDS
        )
        .order_by()
        .values("conversation")
        .annotate(count=Count("id"))
        .values("count")
    )
    return conversations.annotate(unread=Coalesce(Subquery(counted, output_field=IntegerField()), Value(0)))


def conversation_list() -> QuerySet[Conversation]:
    """Return active conversations, newest `updated_at` first, then by id, each with its `unread`."""
    return conversations_unread(
        Conversation.objects.filter(state=ConversationState.ACTIVE).order_by("-updated_at", "id")
    )


def conversation_unread(*, conversation_id: uuid.UUID) -> int | None:
    """Return the conversation's unread count, or None if it is not active."""
    found = conversations_unread(Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE))
    conversation = found.only("id", "read_sequence").first()
    return None if conversation is None else int(conversation.unread)  # type: ignore[attr-defined]


def conversation_listed(*, conversation_id: uuid.UUID) -> Conversation | None:
    """Return the conversation as the list shows it (with its `unread`), or None if it is not active."""
    return conversations_unread(Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE)).first()


def conversation_is_active(*, conversation_id: uuid.UUID) -> bool:
    """Return whether the conversation exists and is not being deleted (inside the caller's transaction)."""
    return Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE).exists()


def conversation_get_active(*, conversation_id: uuid.UUID) -> Conversation | None:
    """Return the conversation if it exists and is not being deleted."""
    return Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE).first()


def conversation_require_active(*, conversation_id: uuid.UUID) -> Conversation:
    """Return the conversation if it exists and is not being deleted; else refuse with ConversationNotFound."""
    conversation = conversation_get_active(conversation_id=conversation_id)
    if conversation is None:
        raise ConversationNotFound()
    return conversation


@dataclass(frozen=True)
class TranscriptSnapshot:
    messages: list[Message]
    turns: list[Turn]
    last_sequence: int
    versions: dict[uuid.UUID, Versions]  # by turn, where a message or answer has versions


def transcript_snapshot(*, conversation_id: uuid.UUID) -> TranscriptSnapshot | None:
    """Return the transcript, its turns and the event high-water mark they match, or None if unknown.

    Writers append events and update messages in one transaction that locks the
    conversation row; taking that lock here makes the reads agree.
    """
    with transaction.atomic():
        conversation = (
            Conversation.objects.select_for_update()
            .filter(id=conversation_id, state=ConversationState.ACTIVE)
            .only("id", "last_sequence")
            .first()
        )
        if conversation is None:
            return None
        messages = list(shown_messages(conversation_id=conversation_id))
        turns = list(
            Turn.objects.filter(conversation_id=conversation_id, shown=True)
            .only("id", "status", "error_code", "error_message")
            .order_by("ordinal")
        )
        # An answer with nothing in it yet (a turn that failed or is about to speak) is not
        # shown; its text, when it comes, arrives as events naming the message.
        shown = [m for m in messages if m.role != MessageRole.ASSISTANT or m.parts]
        versions = transcript_versions(conversation_id=conversation_id)
        return TranscriptSnapshot(shown, turns, conversation.last_sequence, versions)


def shown_messages(*, conversation_id: uuid.UUID) -> QuerySet[Message]:
    """The messages of the shown branch of versions (conversations.versions), in transcript order."""
    return Message.objects.filter(conversation_id=conversation_id, turn__shown=True).order_by("ordinal")


def turns_awaiting_worker(*, turn_ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Return which of these turns no live attempt holds: queued, or running on an expired lease."""
    return sql.turns_lease_over(turn_ids=turn_ids, now=timezone.now())


def providers_configured() -> list[str]:
    """The providers a turn could use now: those with a stored key, and the local model if named."""
    providers = list(ProviderKey.objects.order_by("provider").values_list("provider", flat=True))
    return [*providers, "local"] if settings.CONFIG.local_base_url else providers
