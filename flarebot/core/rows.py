"""The toolkit of plain SQL: what each app's `sql` module builds its statements with.

Submitting a message, starting a turn and storing a streamed window run thousands of
times a minute under load, and building the same ORM query each time costs several times
the CPU the database spends on it. Where a measurement asked for plain SQL, the
statements live in one module per app, always named `sql` (`conversations.sql`,
`memory.sql`, `tools.sql`, `flarebot.core.sql`), with the app's vendor branches. These
helpers keep them readable and portable (PostgreSQL and SQLite): names come from the
models, values are converted by the models' own fields. Everything else uses the ORM.
`transaction_lock` is here as well: the one lock that a count under a limit is read with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

from django.db import models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

M = TypeVar("M", bound=models.Model)

# A version column is a 32-bit integer: its range is what any version may be.
MAX_VERSION = 2**31 - 1


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
    return _param(model._meta.get_field(name), value, _connection())  # type: ignore[arg-type]


def from_db(model: type[models.Model], name: str, value: Any) -> Any:
    """A value read by plain SQL as the field would give it (UUIDs on SQLite, JSON text)."""
    if value is None:
        return None
    connection = _connection()
    expression = model._meta.get_field(name).get_col(model._meta.db_table)  # type: ignore[union-attr]
    for converter in connection.ops.get_db_converters(expression) + expression.get_db_converters(connection):
        value = converter(value, expression, connection)
    return value


def model_from_row(model: type[M], values: Sequence[Any]) -> M:
    """An instance from plain SQL's values of every concrete field, in the model's order."""
    fields = model._meta.concrete_fields
    converted = [from_db(model, field.name, value) for field, value in zip(fields, values, strict=True)]
    return model.from_db(_connection().alias, [field.attname for field in fields], converted)


@dataclass(frozen=True)
class _InsertPlan:
    into: str  # INSERT INTO table (columns)
    prefix: str  # INSERT INTO table (columns) VALUES
    placeholders: str  # one row's (%s, ...)
    fields: tuple[models.Field[Any, Any], ...]
    stamped: tuple[str, ...]  # auto_now / auto_now_add: the current time
    defaulted: tuple[models.Field[Any, Any], ...]  # everything else: the field's default


# Types psycopg sends as they are, which Django's fields on PostgreSQL also pass unchanged
# (for aware datetimes): preparing them field by field was most of an insert's CPU.
_NATIVE_ON_POSTGRESQL = (
    models.UUIDField,
    models.DateTimeField,
    models.IntegerField,
    models.CharField,
    models.TextField,
    models.BooleanField,
)


@cache
def _insert_plan(model: type[models.Model]) -> _InsertPlan:
    fields = tuple(model._meta.concrete_fields)
    columns = ", ".join(_quote(f.column) for f in fields)  # type: ignore[arg-type]
    stamped = tuple(f.attname for f in fields if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False))
    into = f"INSERT INTO {table(model)} ({columns})"
    return _InsertPlan(
        into=into,
        prefix=f"{into} VALUES ",
        placeholders="(" + ", ".join(["%s"] * len(fields)) + ")",
        fields=fields,
        stamped=stamped,
        defaulted=tuple(f for f in fields if f.attname not in stamped),
    )


@cache
def _sent_as_is(field: models.Field[Any, Any], vendor: str) -> bool:
    target = field.target_field if isinstance(field, models.ForeignKey) else field
    return vendor == "postgresql" and isinstance(target, _NATIVE_ON_POSTGRESQL)


def rows_insert(model: type[models.Model], rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Insert rows in one statement; return them with every default filled in.

    Keys are attribute names (`turn_id` for a foreign key). Fields left out get their
    default, and `auto_now`/`auto_now_add` times the current time, as `Model.save()` would.
    """
    if not rows:
        return []
    connection = _connection()
    plan = _insert_plan(model)
    now = timezone.now()
    complete = [_completed(plan, row, now) for row in rows]
    params: list[Any] = []
    for values in complete:
        params += [_param(field, values[field.attname], connection) for field in plan.fields]
    with connection.cursor() as cursor:
        cursor.execute(plan.prefix + ", ".join([plan.placeholders] * len(rows)), params)
    return complete


def insert_from_sql(
    model: type[models.Model], row: Mapping[str, Any], computed: Mapping[str, str], source: str
) -> tuple[str, list[Any], dict[str, Any]]:
    """An `INSERT ... SELECT ... FROM source` of one row, for a statement that composes several.

    Columns named in `computed` take that SQL expression (over `source`) instead of a
    value; the others are filled in as `rows_insert` does. Returns the SQL, its parameters
    and the row's values (without the computed ones).
    """
    connection = _connection()
    plan = _insert_plan(model)
    values = _completed(plan, {**row, **dict.fromkeys(computed)}, timezone.now())
    expressions, params = [], []
    for field in plan.fields:
        if field.attname in computed:
            expressions.append(computed[field.attname])
        else:
            expressions.append("%s")
            params.append(_param(field, values[field.attname], connection))
    for name in computed:
        del values[name]
    return f"{plan.into} SELECT {', '.join(expressions)} FROM {source}", params, values  # noqa: S608


def insert_select_sql(model: type[models.Model], expressions: Mapping[str, str], source: str) -> str:
    """An `INSERT ... SELECT` whose every column is an SQL expression over `source`.

    `expressions` must name every concrete field of the model (by attribute name), so a
    field added to the model later fails here, loudly, instead of silently taking its
    column default on this path.
    """
    plan = _insert_plan(model)
    names = [field.attname for field in plan.fields]
    missing, unknown = set(names) - set(expressions), set(expressions) - set(names)
    if missing or unknown:
        raise ValueError(f"{model.__name__}: no expression for {sorted(missing)}; unknown {sorted(unknown)}")
    return f"{plan.into} SELECT {', '.join(expressions[name] for name in names)} FROM {source}"  # noqa: S608


def _completed(plan: _InsertPlan, row: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    values = dict(row)
    for name in plan.stamped:
        values.setdefault(name, now)
    for field in plan.defaulted:
        if field.attname not in values:
            values[field.attname] = field.get_default()
    return values


def _param(field: models.Field[Any, Any], value: Any, connection: BaseDatabaseWrapper) -> Any:
    return value if _sent_as_is(field, connection.vendor) else field.get_db_prep_save(value, connection)


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


def transaction_lock(key: str) -> None:
    """Hold a lock named `key` until the current transaction ends: its holders run one at a time.

    The one such lock: a count that a limit compares (facts, tasks, a client's sign-in
    attempts) is read under it, so that two writers cannot both see room for one more.

    PostgreSQL: a transaction-scoped advisory lock on a 64-bit hash of the key (another key
    with the same hash would only wait as well). SQLite: every transaction here begins
    IMMEDIATE (settings), so it already holds the database's only write lock.
    """
    connection = _connection()
    if not connection.in_atomic_block:
        raise RuntimeError("transaction_lock needs a transaction")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [key])
    elif connection.settings_dict["OPTIONS"].get("transaction_mode") != "IMMEDIATE":
        raise RuntimeError("transaction_lock needs SQLite transactions to begin IMMEDIATE")
