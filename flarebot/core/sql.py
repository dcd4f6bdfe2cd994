"""The core app's hand-written SQL: the owner-session read every socket frame pays for.

A socket checks its session again before acting on a frame (`sessions.owner_session_recheck`),
so every message sent pays for this read: it is one statement, not an ORM query per row.
It reads Django's database session table, so it holds only while `SESSION_ENGINE` is the
database backend (as the settings have it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import cast

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.sessions.models import Session
from django.db import models, transaction

from flarebot.core.models import Installation
from flarebot.core.rows import column, model_from_row, table, to_db


@dataclass(frozen=True)
class OwnerSessionRows:
    installations: list[Installation]  # at most two, each with its owner loaded
    session_data: str | None  # the session's encoded data, None when it is absent or expired


def _columns(model: type[models.Model], alias: str) -> list[str]:
    return [f"{alias}.{column(model, field.name)}" for field in model._meta.concrete_fields]


@cache
def _owner_session_sql() -> str:
    user, s = get_user_model(), Session
    columns = ", ".join([*_columns(Installation, "i"), *_columns(user, "u")])
    return (
        f"SELECT {columns}, (SELECT s.{column(s, 'session_data')} FROM {table(s)} s"  # noqa: S608
        f" WHERE s.{column(s, 'session_key')} = %s AND s.{column(s, 'expire_date')} > %s)"
        f" FROM {table(Installation)} i JOIN {table(user)} u"
        f" ON u.{column(user, 'id')} = i.{column(Installation, 'owner')} LIMIT 2"
    )


Row = tuple[object, ...]


def owner_session_rows(*, session_key: str, now: datetime) -> tuple[Row, ...]:
    """The installation rows with their owners (at most two) and the session's live data, as read."""
    params = [session_key, to_db(Session, "expire_date", now)]
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(_owner_session_sql(), params)
        return tuple(cursor.fetchall())


def owner_session_from_rows(rows: tuple[Row, ...]) -> OwnerSessionRows:
    """The models in rows that `owner_session_rows` read."""
    user = get_user_model()
    width = len(Installation._meta.concrete_fields)
    installations = []
    for row in rows:
        installation = model_from_row(Installation, row[:width])
        owner: AbstractBaseUser = model_from_row(user, row[width:-1])
        installation.owner = owner  # type: ignore[assignment]
        installations.append(installation)
    session_data = cast("str | None", rows[0][-1]) if rows else None  # the last column of every row
    return OwnerSessionRows(installations, session_data)
