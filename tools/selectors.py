"""Reads of tool activity: a conversation's cards, a page at a time."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from flarebot.core.pages import page_newest_first
from tools.activity import ActivityJson, activity_from_row
from tools.models import ToolActivity

PAGE_SIZE = 100


@dataclass(frozen=True)
class ActivityPage:
    activities: list[ActivityJson]
    next_cursor: str | None


def activity_page(*, conversation_id: uuid.UUID, before: str | None) -> ActivityPage:
    """Return up to 100 activities, newest first, created before the cursor.

    Cursors follow creation (time, then id), which never changes, so a card that is
    updated while the owner pages does not move between pages.
    """
    rows = ToolActivity.objects.filter(conversation_id=conversation_id)
    page, next_cursor = page_newest_first(rows, limit=PAGE_SIZE, before=before)
    activities: list[ActivityJson] = [activity_from_row(row).as_json() for row in page]
    return ActivityPage(activities, next_cursor)
