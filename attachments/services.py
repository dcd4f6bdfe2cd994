"""Attachment writes: storing an upload, claiming attachments for a message, deleting, sweeping.

An upload goes to a conversation, or to none when it is attached in a new chat: the first
message that names it claims it for its own conversation, so no conversation exists before
something is sent. An unsent upload the owner removes goes at once (`attachment_discard`);
one never sent (the page was closed) goes with the sweep after `UNSENT_MAX_AGE`.

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
from django.db.models import Q
from django.utils import timezone

from attachments.errors import AttachmentInvalid, AttachmentNotFound, AttachmentSent, AttachmentTooLarge
from attachments.limits import MESSAGE_BYTES_MAX, MESSAGE_FILES_MAX, UNSENT_MAX_AGE
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


def attachment_create(*, conversation_id: uuid.UUID | None, upload: Upload) -> Attachment:
    """Store a received upload as an attachment of an active conversation, or of none yet (its blob once)."""
    try:
        if conversation_id is not None:
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
    found = {a.id: a for a in Attachment.objects.filter(_claimable(conversation_id), id__in=parsed)}
    if len(found) != len(parsed):
        raise AttachmentInvalid("attachments: not uploaded to this conversation, or sent with another message.")
    attachments = [found[i] for i in parsed]
    if sum(a.size for a in attachments) > MESSAGE_BYTES_MAX:
        raise AttachmentTooLarge(f"The files of one message may be at most {MESSAGE_BYTES_MAX // (1024 * 1024)} MB.")
    return attachments


def attachments_claim(*, conversation_id: uuid.UUID, attachments: list[Attachment], message_id: uuid.UUID) -> None:
    """Tie checked attachments to their message in the caller's transaction; refuse when another took one."""
    ids = [a.id for a in attachments]
    claimed = Attachment.objects.filter(_claimable(conversation_id), id__in=ids).update(
        conversation_id=conversation_id, message_id=message_id
    )
    if claimed != len(ids):
        # A concurrent message took one of them: the caller's transaction rolls back.
        raise AttachmentInvalid("attachments: not uploaded to this conversation, or sent with another message.")


def _claimable(conversation_id: uuid.UUID) -> Q:
    """Attachments a message of this conversation may take: unsent, uploaded to it or to none."""
    return Q(message__isnull=True) & (Q(conversation_id=conversation_id) | Q(conversation__isnull=True))


def attachment_discard(*, attachment_id: uuid.UUID) -> None:
    """Remove an upload that was not sent (the owner removed its chip); its blob goes after commit if unnamed."""
    with transaction.atomic():
        attachment = Attachment.objects.select_for_update().filter(id=attachment_id).first()
        if attachment is None:
            raise AttachmentNotFound()
        if attachment.message_id is not None:
            raise AttachmentSent()
        attachment.delete()
        sha256 = attachment.sha256
        transaction.on_commit(lambda: blobs_release([sha256]))


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
    """Remove uploads interrupted over an hour ago, files of no conversation never sent, and blobs no row names.

    Return how many files went from the disk.
    """
    unsent = Q(conversation__isnull=True, message__isnull=True, created_at__lt=timezone.now() - UNSENT_MAX_AGE)
    with transaction.atomic():
        # A message claiming one of them now holds its row: it is passed by, and is sent.
        ids = list(Attachment.objects.select_for_update(skip_locked=True).filter(unsent).values_list("id", flat=True))
        Attachment.objects.filter(unsent, id__in=ids).delete()
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
