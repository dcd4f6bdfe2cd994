"""Pages of rows, newest first, and the cursor that names where the next page starts.

A cursor names the last row of a page by what never changes, its creation time and then
its id, so a row updated while the owner pages does not move between pages. It is opaque
to clients (base64 of "time|id"); anything else is refused with `invalid_cursor`.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from datetime import UTC, datetime
from typing import TypeVar

from django.db.models import Q, QuerySet

from flarebot.core.errors import InvalidInput
from flarebot.core.models import BaseModel

M = TypeVar("M", bound=BaseModel)

CURSOR_MAX = 200  # characters; a longer `before` is no cursor this API returned


def cursor_of(row: BaseModel) -> str:
    """The cursor of a page that ends with `row`."""
    raw = f"{row.created_at.isoformat()}|{row.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def cursor_parse(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The creation time (in UTC) and id a cursor names, or 400 `invalid_cursor`."""
    try:
        if len(cursor) > CURSOR_MAX:
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


def page_newest_first(rows: QuerySet[M], *, limit: int, before: str | None) -> tuple[list[M], str | None]:
    """Up to `limit` of these rows, newest first (creation time, then id), before the cursor; and the next cursor."""
    if before is not None:
        at, row_id = cursor_parse(before)
        rows = rows.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=row_id))
    page = list(rows.order_by("-created_at", "-id")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return page, cursor_of(page[-1]) if more else None
