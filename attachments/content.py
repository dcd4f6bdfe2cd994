"""What a model is handed for each attachment of its transcript, decided once per turn.

Each provider takes files its own way: Anthropic images and PDFs as blocks, OpenAI images
as data URLs and PDFs as their text, a local model text only (an image becomes a short
note). The way is decided at a turn's first attempt and kept (`Delivery`), so a retried
attempt sends the same even when the model settings changed meanwhile; an adapter that
cannot take the recorded way degrades it (a document to its text, an image to a note).
Everything inline is bounded (`PDF_PAGES_INLINE` pages, `TEXT_CHARS_INLINE` characters);
the rest is read with the `read_attachment` tool, named in the text the model is given.
"""

from __future__ import annotations

import base64
import io
import logging
import uuid
from typing import Any

from attachments.limits import PDF_PAGES_INLINE, TEXT_CHARS_INLINE
from attachments.models import IMAGE_TYPES, Attachment, Delivery, DeliveryMode, MediaType
from attachments.selectors import attachments_by_id
from attachments.storage import blob_path, text_read

logger = logging.getLogger(__name__)

# The Messages API refuses larger images; such an image is described instead.
ANTHROPIC_IMAGE_MAX = 5 * 1024 * 1024
_TAKES: dict[str, frozenset[DeliveryMode]] = {
    "anthropic": frozenset(DeliveryMode),
    "openai": frozenset({DeliveryMode.IMAGE, DeliveryMode.TEXT, DeliveryMode.NOTE}),
    "local": frozenset({DeliveryMode.TEXT, DeliveryMode.NOTE}),
}


def delivery_mode(attachment: Attachment, *, provider: str) -> DeliveryMode:
    """Return how this provider is best handed this attachment."""
    if attachment.media_type in IMAGE_TYPES:
        if provider == "local" or (provider == "anthropic" and attachment.size > ANTHROPIC_IMAGE_MAX):
            return DeliveryMode.NOTE
        return DeliveryMode.IMAGE
    if attachment.media_type == MediaType.PDF:
        return DeliveryMode.DOCUMENT if provider == "anthropic" else DeliveryMode.TEXT
    return DeliveryMode.TEXT


def _degraded(mode: str, *, media_type: str, provider: str) -> DeliveryMode:
    """The recorded way, or the nearest one this provider takes."""
    takes = _TAKES.get(provider, _TAKES["local"])
    if mode in takes:
        return DeliveryMode(mode)
    return DeliveryMode.NOTE if media_type in IMAGE_TYPES else DeliveryMode.TEXT


def transcript_with_attachments(
    *, turn_id: uuid.UUID, conversation_id: uuid.UUID, provider: str, transcript: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Return the transcript with each attachment part carrying its content, as this turn hands it over."""
    ids = [
        uuid.UUID(part["id"])
        for message in transcript
        if message["role"] == "user"
        for part in message["parts"]
        if part.get("type") == "attachment"
    ]
    if not ids:
        return transcript
    rows = attachments_by_id(conversation_id=conversation_id, ids=ids)
    Delivery.objects.bulk_create(
        [
            Delivery(turn_id=turn_id, attachment=row, mode=delivery_mode(row, provider=provider))
            for row in rows.values()
        ],
        ignore_conflicts=True,  # a concurrent attempt decided first: its way stands
    )
    modes = dict(Delivery.objects.filter(turn_id=turn_id, attachment_id__in=ids).values_list("attachment_id", "mode"))
    resolved = []
    for message in transcript:
        if message["role"] != "user" or not any(p.get("type") == "attachment" for p in message["parts"]):
            resolved.append(message)
            continue
        parts = []
        for part in message["parts"]:
            if part.get("type") == "attachment":
                row = rows.get(uuid.UUID(part["id"]))
                part = _content(row, part, modes.get(row.id) if row else None, provider=provider)
            parts.append(part)
        resolved.append({**message, "parts": parts})
    return resolved


def _label(part: dict[str, Any]) -> str:
    return f'Attached file "{part["name"]}" ({part["media_type"]}, {part["size"]:,} bytes, id {part["id"]})'


def _content(row: Attachment | None, part: dict[str, Any], mode: str | None, *, provider: str) -> dict[str, Any]:
    """One attachment part with what the model receives: `mode`, and `data` (base64) and/or `text`."""
    label = _label(part)
    if row is None or mode is None:
        return {**part, "mode": DeliveryMode.NOTE, "text": f"[{label}: no longer available.]"}
    way = _degraded(mode, media_type=row.media_type, provider=provider)
    path = blob_path(row.sha256)
    try:
        if way == DeliveryMode.NOTE:
            why = "this model does not take images" if provider == "local" else "it is too large to show"
            return {**part, "mode": way, "text": f"[{label}: an image, not shown: {why}.]"}
        if way == DeliveryMode.IMAGE:
            data = base64.b64encode(path.read_bytes()).decode()
            return {**part, "mode": way, "data": data, "text": f"[{label}]"}
        if way == DeliveryMode.DOCUMENT:
            head, shown, total = pdf_head(path.read_bytes(), PDF_PAGES_INLINE)
            rest = "" if shown == total else f" Pages 1-{shown} of {total} are attached; {_more(part)}"
            return {**part, "mode": way, "data": base64.b64encode(head).decode(), "text": f"[{label}.{rest}]"}
        if row.media_type == MediaType.PDF:
            text, shown, total = pdf_text(path.read_bytes(), pages=PDF_PAGES_INLINE)
            if shown < total:
                label += f"; pages 1-{shown} of {total}, {_more(part)}"
        else:
            text = text_read(path)
        return {**part, "mode": way, "text": inline_text(label, text, part)}
    except Exception:
        # A malformed PDF or an unreadable blob: the model is told, the turn goes on.
        logger.warning("attachment %s could not be read for the model", row.id, exc_info=True)
        return {**part, "mode": DeliveryMode.NOTE, "text": f"[{label}: it could not be read.]"}


def _more(part: dict[str, Any]) -> str:
    return f'read the rest with read_attachment (attachment_id "{part["id"]}", offset in characters).'


def inline_text(label: str, text: str, part: dict[str, Any]) -> str:
    """Return a text file's content as the model sees it inline: labelled and bounded."""
    if len(text) <= TEXT_CHARS_INLINE:
        return f"[{label}]\n{text}\n[End of {part['name']}]"
    head = text[:TEXT_CHARS_INLINE]
    return f"[{label}: the first {TEXT_CHARS_INLINE:,} of {len(text):,} characters; {_more(part)}]\n{head}\n[...]"


def pdf_reader(data: bytes) -> Any:
    """Return a pypdf reader of a PDF's bytes."""
    from pypdf import PdfReader

    return PdfReader(io.BytesIO(data))


def pdf_text(data: bytes, *, pages: int | None = None, first: int = 1) -> tuple[str, int, int]:
    """Return the text of a PDF's pages from `first` (at most `pages` of them), each after a `--- page N ---` marker.

    Also returns the number of the last page read and how many pages the PDF has.
    """
    reader = pdf_reader(data)
    total = len(reader.pages)
    last = total if pages is None else min(total, first - 1 + pages)
    text = "\n".join(f"--- page {i} ---\n{reader.pages[i - 1].extract_text() or ''}" for i in range(first, last + 1))
    return text, last, total


def pdf_head(data: bytes, pages: int) -> tuple[bytes, int, int]:
    """Return a PDF of at most `pages` first pages, how many it holds, and how many the whole has."""
    from pypdf import PdfWriter

    reader = pdf_reader(data)
    total = len(reader.pages)
    if total <= pages:
        return data, total, total
    writer = PdfWriter()
    for page in reader.pages[:pages]:
        writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue(), pages, total
