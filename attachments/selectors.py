"""Attachment reads: one attachment for serving, a conversation's for the model and its tool."""

from __future__ import annotations

import uuid

from attachments.errors import AttachmentNotFound
from attachments.models import Attachment
from conversations.models import ConversationState


def attachment_get(*, attachment_id: uuid.UUID, conversation_id: uuid.UUID | None = None) -> Attachment:
    """Return an attachment of an active conversation (of this one, when given); else raise AttachmentNotFound."""
    rows = Attachment.objects.filter(id=attachment_id, conversation__state=ConversationState.ACTIVE)
    if conversation_id is not None:
        rows = rows.filter(conversation_id=conversation_id)
    attachment = rows.first()
    if attachment is None:
        raise AttachmentNotFound()
    return attachment


def attachments_by_id(*, conversation_id: uuid.UUID, ids: list[uuid.UUID]) -> dict[uuid.UUID, Attachment]:
    """Return the attachments of a conversation among these ids."""
    return {a.id: a for a in Attachment.objects.filter(conversation_id=conversation_id, id__in=ids)}
