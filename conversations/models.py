"""Conversations: the owner's separate threads with Flarebot."""

from __future__ import annotations

from django.db import models

from flarebot.core.models import BaseModel, SingletonModel


class ConversationState(models.TextChoices):
    ACTIVE = "active", "Active"
    # Inaccessible to every route and socket; its data is being torn down.
    DELETING = "deleting", "Deleting"


class Conversation(BaseModel):
    """One conversation. `updated_at` is its latest message (or its creation): a rename leaves it."""

    name = models.CharField(max_length=120)
    # The owner chose the name (at creation or by renaming); otherwise the first message
    # titles the conversation (conversations.titles).
    name_is_custom = models.BooleanField(default=False)
    # Counters bumped with F() updates (which leave updated_at alone): the event log's
    # high-water mark and the ordinal of the latest turn.
    last_sequence = models.PositiveBigIntegerField(default=0)
    last_turn_ordinal = models.PositiveIntegerField(default=0)
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


class TurnStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_TURN_STATUSES = (TurnStatus.COMPLETED, TurnStatus.FAILED, TurnStatus.CANCELLED)


class Turn(BaseModel):
    """One user message and the agent's work answering it.

    Turns of a conversation run one at a time in `ordinal` order. A worker owns a turn
    while its lease (`lease_token`, `lease_expires_at`) is live; the reconciliation job
    requeues turns whose lease expired because their worker died.
    """

    # Its lookups are served by the composite indexes below, which start with it.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns", db_index=False)
    ordinal = models.PositiveIntegerField()
    request_id = models.UUIDField()
    status = models.CharField(max_length=16, choices=TurnStatus.choices, default=TurnStatus.QUEUED)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    # Attempts in a row that ended (stall, crash, dropped stream) without new output.
    attempts_without_progress = models.PositiveIntegerField(default=0)
    lease_token = models.CharField(max_length=32, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    provider = models.CharField(max_length=32, blank=True, default="")
    model = models.CharField(max_length=128, blank=True, default="")
    steps = models.PositiveIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.CharField(max_length=500, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "request_id"], name="conv_turn_request_unique"),
            models.UniqueConstraint(fields=["conversation", "ordinal"], name="conv_turn_ordinal_unique"),
            models.CheckConstraint(condition=models.Q(status__in=TurnStatus.values), name="conv_turn_status_valid"),
        ]
        indexes = [
            # turn_claim / turn_next_runnable: unfinished turns of a conversation in order
            models.Index(fields=["conversation", "status", "ordinal"], name="conv_turn_queue"),
            # turns_reconcile: running turns whose lease expired, queued turns left behind
            models.Index(fields=["status", "lease_expires_at"], name="conv_turn_lease"),
        ]


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


class Message(BaseModel):
    """A transcript message: the user's text, or the assistant's text and tool parts of a turn."""

    # Both served by the composite indexes below, which start with them: every message
    # written while streaming would otherwise update two more indexes.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False)
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="messages", db_index=False)
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    # Transcript order: 2 * turn ordinal, plus 1 for the assistant's answer to it.
    ordinal = models.PositiveIntegerField()
    parts = models.JSONField(default=list)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "role"], name="conv_message_turn_role_unique"),
            models.CheckConstraint(condition=models.Q(role__in=MessageRole.values), name="conv_message_role_valid"),
        ]
        indexes = [
            # message_list / transcript_for_turn: a conversation's transcript in order
            models.Index(fields=["conversation", "ordinal"], name="conv_message_transcript"),
        ]


class Event(BaseModel):
    """One durable entry of a conversation's event log, numbered without gaps by `sequence`."""

    # Served by the sequence constraint's index, which starts with it: each streamed window
    # inserts events, and a second index on the same column only cost time.
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="events", db_index=False)
    sequence = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=40)
    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, null=True, blank=True, related_name="events")
    data = models.JSONField(default=dict)

    class Meta:
        constraints = [
            # Also the index of event_list_after (replay after a sequence).
            models.UniqueConstraint(fields=["conversation", "sequence"], name="conv_event_sequence_unique"),
        ]


class ModelConfiguration(SingletonModel):
    """The provider and model every conversation uses (one row; absent means the default)."""

    provider = models.CharField(max_length=32)
    model = models.CharField(max_length=128)

    class Meta(SingletonModel.Meta):
        pass


class ProviderKey(BaseModel):
    """A provider's API key, sealed with AES-256-GCM (see flarebot.core.crypto); never plaintext."""

    provider = models.CharField(max_length=32, unique=True)
    sealed = models.BinaryField()
    # When the provider last took this key; None: it could not be asked when it was saved.
    verified_at = models.DateTimeField(null=True, blank=True)


class InstructionOverride(SingletonModel):
    """The owner's instructions replacing the shipped defaults; absent means the defaults."""

    text = models.TextField()

    class Meta(SingletonModel.Meta):
        pass


class SearchEntry(BaseModel):
    """The searchable text of a conversation's name, or of one message of a finished turn.

    The source of the full-text index of `GET /api/conversations/?q=` (the index itself is
    the migration's: FTS5 on SQLite, a generated tsvector on PostgreSQL). Written when a
    turn ends and when a conversation is named, never while an answer streams.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="+", db_index=False)
    # None for the conversation's name.
    message = models.ForeignKey(
        Message, on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )  # looked up through the unique constraint below
    text = models.TextField()

    class Meta:
        constraints = [
            # search_index_title: one entry for a conversation's name (also its lookup index)
            models.UniqueConstraint(
                fields=["conversation"], condition=models.Q(message__isnull=True), name="conv_search_title_unique"
            ),
            # search_index_turn: one entry per message
            models.UniqueConstraint(fields=["message"], name="conv_search_message_unique"),
        ]
        indexes = [
            # conversation deletion cascades here
            models.Index(fields=["conversation"], name="conv_search_conversation"),
        ]
