"""The tools app's hand-written SQL: the check every turn's end makes for unfinished tool calls.

Ending a turn asks whether any of its tool activities is still unfinished (a crash cut it
off); almost always none is, and that answer costs one plain statement instead of an ORM
query. Names come from the models (`flarebot.core.rows`).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection

from django.db import transaction

from flarebot.core.rows import column, table, to_db
from tools.models import ToolActivity


def activities_unfinished_exist(*, turn_id: uuid.UUID, finished: Collection[str]) -> bool:
    """Whether the turn has an activity whose status is not one of `finished`."""
    a = ToolActivity
    placeholders = ", ".join(["%s"] * len(finished))
    sql = (
        f"SELECT 1 FROM {table(a)} WHERE {column(a, 'turn_id')} = %s"  # noqa: S608
        f" AND {column(a, 'status')} NOT IN ({placeholders}) LIMIT 1"
    )
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, [to_db(a, "turn_id", turn_id), *sorted(finished)])
        return cursor.fetchone() is not None
