"""Plain SQL for the few statements on the streaming hot path.

Submitting a message, starting a turn and storing a streamed window run thousands of
times a minute under load, and building the same ORM query each time cost several times
the CPU the database spent on it (measured: a turn's start went from 9.4 to about 3 ms of
CPU). These helpers keep such statements readable and portable (PostgreSQL and SQLite):
names come from the models, values are converted by the models' own fields, and the
statements stay in the services that own the rules. Everything else uses the ORM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from django.db import models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone


def _connection() -> BaseDatabaseWrapper:
    return transaction.get_connection()


@cache
def table(model: type[models.Model]) -> str:
    """The model's table name, quoted (PostgreSQL and SQLite quote alike)."""
    return _quote(model._meta.db_table)


@cache
def column(model: type[models.Model], name: str) -> str:
    """A field's column name, quoted."""
    return _quote(model._meta.get_field(name).column)  # type: ignore[arg-type,union-attr]


def _quote(name: str) -> str:
    assert '"' not in name
    return f'"{name}"'


def to_db(model: type[models.Model], name: str, value: Any) -> Any:
    """A Python value as the statement parameter the field would send."""
    field = model._meta.get_field(name)
    return field.get_db_prep_save(value, _connection())  # type: ignore[union-attr]


def from_db(model: type[models.Model], name: str, value: Any) -> Any:
    """A value read by plain SQL as the field would give it (UUIDs on SQLite, JSON text)."""
    if value is None:
        return None
    connection = _connection()
    expression = model._meta.get_field(name).get_col(model._meta.db_table)  # type: ignore[union-attr]
    for converter in connection.ops.get_db_converters(expression) + expression.get_db_converters(connection):
        value = converter(value, expression, connection)
    return value


@cache
def _insert_prefix(model: type[models.Model]) -> tuple[str, tuple[models.Field[Any, Any], ...], str]:
    fields = tuple(f for f in model._meta.concrete_fields)
    columns = ", ".join(_quote(f.column) for f in fields)  # type: ignore[arg-type]
    placeholders = "(" + ", ".join(["%s"] * len(fields)) + ")"
    return f"INSERT INTO {table(model)} ({columns}) VALUES ", fields, placeholders  # noqa: S608


def rows_insert(model: type[models.Model], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Insert rows in one statement; return them with every default filled in.

    Keys are field names (`turn_id` for a foreign key). Fields left out get their default,
    and `auto_now`/`auto_now_add` times the current time, as `Model.save()` would.
    """
    if not rows:
        return []
    connection = _connection()
    prefix, fields, placeholders = _insert_prefix(model)
    now = timezone.now()
    complete: list[dict[str, Any]] = []
    params: list[Any] = []
    for row in rows:
        values = dict(row)
        for field in fields:
            if field.attname in values:
                continue
            if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
                values[field.attname] = now
            else:
                values[field.attname] = field.get_default()
        complete.append(values)
        params += [field.get_db_prep_save(values[field.attname], connection) for field in fields]
    with connection.cursor() as cursor:
        cursor.execute(prefix + ", ".join([placeholders] * len(rows)), params)
    return complete


def rows_update(model: type[models.Model], where: Mapping[str, Any], values: Mapping[str, Any]) -> int:
    """`UPDATE ... SET values WHERE` every `where` field equals its value; return the row count.

    Like `QuerySet.update()`, it leaves `auto_now` fields alone.
    """
    connection = _connection()
    sets = ", ".join(f"{column(model, name)} = %s" for name in values)
    conditions = " AND ".join(f"{column(model, name)} = %s" for name in where)
    params = [to_db(model, name, value) for name, value in values.items()]
    params += [to_db(model, name, value) for name, value in where.items()]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table(model)} SET {sets} WHERE {conditions}", params)  # noqa: S608
        return int(cursor.rowcount)
