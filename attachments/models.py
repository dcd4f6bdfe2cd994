"""One row per uploaded file; the file itself is a blob stored once by its content hash (attachments.storage).

An attachment belongs to a conversation from its upload, and to a message once a message
names it (at most one message: `message` is set by the submit that claims it). A file
attached in a new chat, before any conversation exists, is uploaded to none: the first
message that names it claims it for its conversation, and one never sent goes with the
sweep (or at once when the owner removes it). The name is kept as the owner gave it,
cleaned, for display only: it is never used as a path.
"""

from __future__ import annotations

from django.db import models

from flarebot.core.models import BaseModel


class MediaType(models.TextChoices):
    PNG = "image/png", "PNG image"
    JPEG = "image/jpeg", "JPEG image"
    GIF = "image/gif", "GIF image"
    WEBP = "image/webp", "WebP image"
    PDF = "application/pdf", "PDF"
    TEXT = "text/plain", "Text"
    MARKDOWN = "text/markdown", "Markdown"
    CSV = "text/csv", "CSV"
    JSON = "application/json", "JSON"


IMAGE_TYPES = frozenset({MediaType.PNG, MediaType.JPEG, MediaType.GIF, MediaType.WEBP})
TEXT_TYPES = frozenset({MediaType.TEXT, MediaType.MARKDOWN, MediaType.CSV, MediaType.JSON})


class Attachment(BaseModel):
    # None for a file uploaded before its conversation exists (a new chat), until a message claims it.
    conversation = models.ForeignKey(
        "conversations.Conversation", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    message = models.ForeignKey(
        "conversations.Message", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    name = models.CharField(max_length=255)
    media_type = models.CharField(max_length=32, choices=MediaType.choices)
    size = models.PositiveBigIntegerField()
    # The tool call that returned this file (a shell command's /workspace/out), "" for an upload:
    # with the answer message and the name, what makes a retried call store it once.
    tool_call_id = models.CharField(max_length=128, blank=True, default="")
    sha256 = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(media_type__in=MediaType.values), name="attachments_type_valid"),
            models.CheckConstraint(condition=~models.Q(name=""), name="attachments_name_not_empty"),
            models.CheckConstraint(condition=models.Q(sha256__regex=r"^[0-9a-f]{64}$"), name="attachments_sha256_hex"),
            # A sent file is always its message's conversation's.
            models.CheckConstraint(
                condition=models.Q(message__isnull=True) | models.Q(conversation__isnull=False),
                name="attachments_sent_in_conversation",
            ),
            # attachment_from_tool: one row per file a call returned
            models.UniqueConstraint(
                fields=["message", "tool_call_id", "name"],
                condition=~models.Q(tool_call_id=""),
                name="attachments_tool_file_once",
            ),
        ]
        indexes = [
            # attachments_claim and attachments_delete: a conversation's attachments; the sweep:
            # the unsent ones of no conversation (NULL), oldest first
            models.Index(fields=["conversation", "created_at"], name="attachments_conversation"),
            # blobs_unreferenced: whether any row still names a blob
            models.Index(fields=["sha256"], name="attachments_sha256"),
        ]

    def __str__(self) -> str:
        return f"attachment {self.id}"


class DeliveryMode(models.TextChoices):
    IMAGE = "image", "Image block"
    DOCUMENT = "document", "PDF document block"
    TEXT = "text", "Text inline"
    NOTE = "note", "A note that the file is not shown"


class Delivery(BaseModel):
    """How one turn hands one attachment to its model: decided at the turn's first attempt, kept for its retries."""

    turn = models.ForeignKey("conversations.Turn", on_delete=models.CASCADE, related_name="+")
    attachment = models.ForeignKey(Attachment, on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=16, choices=DeliveryMode.choices)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(mode__in=DeliveryMode.values), name="attachments_delivery_mode"),
            # deliveries_for_turn: one mode per attachment of a turn
            models.UniqueConstraint(fields=["turn", "attachment"], name="attachments_delivery_once"),
        ]

    def __str__(self) -> str:
        return f"{self.mode} of {self.attachment_id} in {self.turn_id}"
