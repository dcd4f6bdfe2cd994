"""Attachments a tool hands over: the conversation's files for a sandbox, and files it returned.

A returned file is stored like an upload (sniffed by its content, refused types refused,
at most `FILE_MAX`), as an attachment of the turn's answer message, keyed by the call
and its name: a call run again (a retried turn step, a recovery) finds the row it stored
and stores nothing twice. The blob is written by hash, once per content.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import uuid
from pathlib import Path

from django.db import transaction

from attachments.errors import AttachmentTooLarge
from attachments.limits import FILE_MAX, too_large_message
from attachments.models import Attachment
from attachments.services import blobs_locked
from attachments.storage import Sniffer, blob_commit, blob_path, name_clean, tmp_dir
from conversations.models import Message, MessageRole
from conversations.selectors import conversation_require_active


def attachments_for_sandbox(*, conversation_id: uuid.UUID, bytes_max: int) -> tuple[list[Attachment], list[Attachment]]:
    """Return the conversation's sent attachments to copy into a sandbox, newest first within `bytes_max`,
    and those left out (over the bound)."""
    rows = Attachment.objects.filter(conversation_id=conversation_id, message__isnull=False).order_by(
        "-created_at", "-id"
    )
    kept: list[Attachment] = []
    left: list[Attachment] = []
    total = 0
    for row in rows:
        if total + row.size <= bytes_max:
            kept.append(row)
            total += row.size
        else:
            left.append(row)
    return kept, left


def attachment_blob(attachment: Attachment) -> Path:
    """Return where an attachment's content is on the host (never shown to anyone)."""
    return blob_path(attachment.sha256)


def attachment_from_tool(
    *, conversation_id: uuid.UUID, turn_id: uuid.UUID, tool_call_id: str, name: str, data: bytes
) -> Attachment:
    """Store a file a tool call returned as an attachment of the turn's answer; raise UnsupportedType or
    AttachmentTooLarge (nothing stored)."""
    if len(data) > FILE_MAX:
        raise AttachmentTooLarge(too_large_message())
    clean = name_clean(name)
    sniffer = Sniffer(clean)
    sniffer.feed(data)
    media_type = sniffer.finish()
    conversation_require_active(conversation_id=conversation_id)
    answer = Message.objects.get(turn_id=turn_id, role=MessageRole.ASSISTANT)
    key = {"message": answer, "tool_call_id": tool_call_id[:128], "name": clean}
    found = Attachment.objects.filter(**key).first()
    if found is not None:
        return found
    sha256 = hashlib.sha256(data).hexdigest()
    with tempfile.NamedTemporaryFile(dir=tmp_dir(), prefix="tool-", delete=False) as temporary:
        temporary.write(data)
        temporary.flush()
        os.fsync(temporary.fileno())
    path = Path(temporary.name)
    try:
        with blobs_locked(), transaction.atomic():
            attachment, _ = Attachment.objects.get_or_create(
                **key,
                defaults={
                    "conversation_id": conversation_id,
                    "media_type": media_type,
                    "size": len(data),
                    "sha256": sha256,
                },
            )
            blob_commit(path, sha256)
    finally:
        path.unlink(missing_ok=True)
    return attachment
