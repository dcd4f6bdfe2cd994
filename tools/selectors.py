"""Reads of tool activity: a conversation's cards, a page at a time."""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Q

from flarebot.core.errors import InvalidInput
from tools.activity import ActivityJson, activity_from_row
from tools.models import ToolActivity

PAGE_SIZE = 100


@dataclass(frozen=True)
class ActivityPage:
    activities: list[ActivityJson]
    next_cursor: str | None


def _cursor(row: ToolActivity) -> str:
    raw = f"{row.created_at.isoformat()}|{row.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor_parse(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        if len(cursor) > 200:
            raise ValueError
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, row_id = raw.split("|")
        at = datetime.fromisoformat(created)
        if at.tzinfo is None:
            raise ValueError
        # In UTC, as the database compares it: a cursor near year 1 or 9999 whose offset
        # crosses the year's edge overflows here, not in the query.
        return at.astimezone(UTC), uuid.UUID(row_id)
    except (ValueError, OverflowError, binascii.Error, UnicodeDecodeError) as error:
        raise InvalidInput("before: not a cursor this endpoint returned.", code="invalid_cursor") from error


def activity_page(*, conversation_id: uuid.UUID, before: str | None) -> ActivityPage:
    """Return up to 100 activities, newest first, created before the cursor.

    Cursors follow creation (time, then id), which never changes, so a card that is
    updated while the owner pages does not move between pages.
    """
    rows = ToolActivity.objects.filter(conversation_id=conversation_id)
    if before is not None:
        at, row_id = _cursor_parse(before)
        rows = rows.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=row_id))
    page = list(rows.order_by("-created_at", "-id")[: PAGE_SIZE + 1])
    more = len(page) > PAGE_SIZE
    page = page[:PAGE_SIZE]
    activities: list[ActivityJson] = [activity_from_row(row).as_json() for row in page]
    return ActivityPage(activities, _cursor(page[-1]) if more else None)
