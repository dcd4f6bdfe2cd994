"""Attachment writes: storing an upload, claiming attachments for a message, deleting, sweeping.

Blobs are shared by content: a blob goes only when no row names it. Storing (row, then
blob, then commit) and releasing (is any row left? then remove) take one file lock under
the attachments directory, so a blob another upload is just adding is never removed from
under it. The sweep also leaves alone anything younger than `TMP_MAX_AGE`.
"""

from __future__ import annotations

import fcntl
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict

from django.db import transaction

from attachments.errors import AttachmentInvalid, AttachmentTooLarge
from attachments.limits import MESSAGE_BYTES_MAX, MESSAGE_FILES_MAX
from attachments.models import Attachment
from attachments.storage import TMP_MAX_AGE, blob_commit, blob_path, blob_remove, blobs_stored, root, tmp_dir
from attachments.uploads import Upload
from conversations.selectors import conversation_require_active


class AttachmentPart(TypedDict):
    """A message's part naming one attachment, as the transcript and the socket carry it."""

    type: str  # "attachment"
    id: str
    name: str
    media_type: str
    size: int


@contextmanager
def _blobs_locked() -> Iterator[None]:
    root().mkdir(parents=True, exist_ok=True)
    with open(root() / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def attachment_create(*, conversation_id: uuid.UUID, upload: Upload) -> Attachment:
    """Store a received upload as an attachment of an active conversation (its blob once per content)."""
    try:
        conversation_require_active(conversation_id=conversation_id)
        with _blobs_locked(), transaction.atomic():
            attachment = Attachment.objects.create(
                conversation_id=conversation_id,
                name=upload.name,
                media_type=upload.media_type,
                size=upload.size,
                sha256=upload.sha256,
            )
            blob_commit(upload.path, upload.sha256)
    finally:
        upload.path.unlink(missing_ok=True)  # moved into place, or refused
    return attachment


def attachment_part(attachment: Attachment) -> AttachmentPart:
    """Return the message part that names this attachment."""
    return {
        "type": "attachment",
        "id": str(attachment.id),
        "name": attachment.name,
        "media_type": attachment.media_type,
        "size": attachment.size,
    }


def attachments_for_message(*, conversation_id: uuid.UUID, ids: list[Any]) -> list[Attachment]:
    """Check the attachments a message names (this conversation's, not sent yet, within the limits); in order."""
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise AttachmentInvalid("attachments: must be a list of attachment ids.")
    if len(ids) > MESSAGE_FILES_MAX:
        raise AttachmentInvalid(f"attachments: at most {MESSAGE_FILES_MAX} files per message.")
    parsed = []
    for raw in ids:
        try:
            parsed.append(uuid.UUID(raw))
        except ValueError:
            raise AttachmentInvalid("attachments: each must be an attachment id.") from None
    if len(set(parsed)) != len(parsed):
        raise AttachmentInvalid("attachments: an attachment is named twice.")
    found = {
        a.id: a for a in Attachment.objects.filter(id__in=parsed, conversation_id=conversation_id, message__isnull=True)
    }
    if len(found) != len(parsed):
        raise AttachmentInvalid("attachments: not uploaded to this conversation, or sent with another message.")
    attachments = [found[i] for i in parsed]
    if sum(a.size for a in attachments) > MESSAGE_BYTES_MAX:
        raise AttachmentTooLarge(f"The files of one message may be at most {MESSAGE_BYTES_MAX // (1024 * 1024)} MB.")
    return attachments


def attachments_claim(*, conversation_id: uuid.UUID, attachments: list[Attachment], message_id: uuid.UUID) -> None:
    """Tie checked attachments to their message in the caller's transaction; refuse when another took one."""
    ids = [a.id for a in attachments]
    claimed = Attachment.objects.filter(id__in=ids, conversation_id=conversation_id, message__isnull=True).update(
        message_id=message_id
    )
    if claimed != len(ids):
        # A concurrent message took one of them: the caller's transaction rolls back.
        raise AttachmentInvalid("attachments: not uploaded to this conversation, or sent with another message.")


def attachments_delete(*, conversation_id: uuid.UUID) -> None:
    """Delete a conversation's attachments; their blobs go after commit unless another row names them."""
    rows = Attachment.objects.filter(conversation_id=conversation_id)
    hashes = set(rows.values_list("sha256", flat=True))
    rows.delete()
    if hashes:
        transaction.on_commit(lambda: blobs_release(hashes))


def blobs_release(hashes: Iterable[str]) -> None:
    """Remove each blob no attachment names any more."""
    with _blobs_locked():
        for sha256 in hashes:
            if not Attachment.objects.filter(sha256=sha256).exists():
                blob_remove(sha256)


def attachments_sweep() -> int:
    """Remove uploads interrupted over an hour ago and blobs no row names; return how many files went."""
    cutoff = time.time() - TMP_MAX_AGE.total_seconds()
    removed = 0
    for path in tmp_dir().iterdir():
        if path.is_file() and path.stat().st_mtime < cutoff:
            path.unlink(missing_ok=True)
            removed += 1
    with _blobs_locked():
        stored = blobs_stored()
        named = set(Attachment.objects.filter(sha256__in=stored).values_list("sha256", flat=True))
        for sha256 in set(stored) - named:
            path = blob_path(sha256)
            if path.exists() and path.stat().st_mtime < cutoff:
                blob_remove(sha256)
                removed += 1
    return removed


blobs_locked = _blobs_locked  # for the other writers of blobs (attachments.tool_files)
