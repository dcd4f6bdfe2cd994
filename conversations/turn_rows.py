"""The statements of a turn's hot path, in plain SQL (see flarebot.core.rows for why).

Each function is one step of the path and holds no rule: `turns` and the engine decide
what the rows mean. A step is one statement on PostgreSQL (data-modifying CTEs) and the
same rows statement by statement on SQLite. They run inside the caller's transaction.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.db import transaction

from conversations.eventlog import sequences_allocate, sequences_allocate_params, sequences_allocate_sql
from conversations.models import Conversation, ConversationState, Event, Message, Turn, TurnStatus
from flarebot.core.rows import column, from_db, insert_from_sql, rows_insert, table, to_db


def conversation_reserve_turn(
    *, conversation_id: uuid.UUID, request_id: uuid.UUID, title: str, now: datetime
) -> tuple[int, int] | None:
    """Take the next turn ordinal and one event sequence of an active conversation.

    The same statement moves the conversation to the top of the list (`updated_at` is
    `now`) and, when this is its first turn and the owner never named it, names it
    `title`. Returns (ordinal, sequence), or None when the conversation is not active or
    already has a turn for this request. Locks the conversation row until commit.
    """
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(_reserve_sql(), _reserve_params(conversation_id, request_id, title, now))
        row = cursor.fetchone()
    return (int(row[0]), int(row[1])) if row else None


@cache
def _reserve_sql() -> str:
    c, t = Conversation, Turn
    ordinal, name = column(c, "last_turn_ordinal"), column(c, "name")
    # SET expressions read the row as it was: an ordinal of 0 means no turn yet.
    return (
        f"UPDATE {table(c)} SET {ordinal} = {ordinal} + 1,"  # noqa: S608
        f" {column(c, 'last_sequence')} = {column(c, 'last_sequence')} + 1,"
        f" {name} = CASE WHEN NOT {column(c, 'name_is_custom')} AND {ordinal} = 0 THEN %s ELSE {name} END,"
        f" {column(c, 'updated_at')} = %s"
        f" WHERE {column(c, 'id')} = %s AND {column(c, 'state')} = %s AND NOT EXISTS ("
        f"SELECT 1 FROM {table(t)} WHERE {column(t, 'conversation')} = %s AND {column(t, 'request_id')} = %s)"
        f" RETURNING {ordinal}, {column(c, 'last_sequence')}"
    )


def _reserve_params(conversation_id: uuid.UUID, request_id: uuid.UUID, title: str, now: datetime) -> list[Any]:
    c = Conversation
    conversation = to_db(c, "id", conversation_id)
    return [
        to_db(c, "name", title),
        to_db(c, "updated_at", now),
        conversation,
        ConversationState.ACTIVE.value,
        conversation,
        to_db(Turn, "request_id", request_id),
    ]


def turn_submit_in_one(
    *,
    conversation_id: uuid.UUID,
    request_id: uuid.UUID,
    title: str,
    now: datetime,
    turn: dict[str, Any],
    message: dict[str, Any],
    event: dict[str, Any],
) -> tuple[int, int] | None:
    """PostgreSQL: reserve the ordinal and sequence and insert the three rows in one statement.

    The same as `conversation_reserve_turn` followed by the three inserts (what SQLite
    does), in one round trip: every message the owner sends takes this path. The rows
    come complete but for the turn's and message's ordinals and the event's sequence.
    Returns (ordinal, sequence), or None when nothing was reserved (nor inserted).
    """
    turn_sql, turn_params, _ = insert_from_sql(Turn, turn, {"ordinal": "r.ordinal"}, "r")
    message_sql, message_params, _ = insert_from_sql(Message, message, {"ordinal": "2 * r.ordinal"}, "r")
    event_sql, event_params, _ = insert_from_sql(Event, event, {"sequence": "r.sequence"}, "r")
    sql = (
        f"WITH r(ordinal, sequence) AS ({_reserve_sql()}), t AS ({turn_sql}), m AS ({message_sql}),"  # noqa: S608
        f" e AS ({event_sql}) SELECT ordinal, sequence FROM r"
    )
    reserve = _reserve_params(conversation_id, request_id, title, now)
    params = [*reserve, *turn_params, *message_params, *event_params]
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return (int(row[0]), int(row[1])) if row else None


@dataclass(frozen=True)
class ClaimRow:
    """What a claim reads of a turn, its conversation and its predecessors."""

    id: uuid.UUID
    conversation_id: uuid.UUID
    ordinal: int
    status: str
    lease_expires_at: datetime | None
    attempts: int
    attempts_without_progress: int
    cancel_requested: bool
    started_at: datetime | None
    steps: int
    conversation_state: str
    waits: bool  # an earlier turn of the conversation is unfinished


_CLAIM_COLUMNS = (
    "id",
    "conversation",
    "ordinal",
    "status",
    "lease_expires_at",
    "attempts",
    "attempts_without_progress",
    "cancel_requested",
    "started_at",
    "steps",
)


def turn_lock_for_claim(*, turn_id: uuid.UUID) -> ClaimRow | None:
    """Read and lock a turn's row (only the turn's: see turns.turn_claim)."""
    c, t = Conversation, Turn
    connection = transaction.get_connection()
    selected = ", ".join(f"t.{column(t, name)}" for name in _CLAIM_COLUMNS)
    unfinished = ", ".join(["%s"] * 2)
    sql = (
        f"SELECT {selected}, c.{column(c, 'state')}, EXISTS ("  # noqa: S608
        f"SELECT 1 FROM {table(t)} e WHERE e.{column(t, 'conversation')} = t.{column(t, 'conversation')}"
        f" AND e.{column(t, 'ordinal')} < t.{column(t, 'ordinal')} AND e.{column(t, 'status')} IN ({unfinished}))"
        f" FROM {table(t)} t JOIN {table(c)} c ON c.{column(c, 'id')} = t.{column(t, 'conversation')}"
        f" WHERE t.{column(t, 'id')} = %s"
    )
    if connection.features.has_select_for_update_of:
        sql += " FOR UPDATE OF t"
    with connection.cursor() as cursor:
        cursor.execute(sql, [TurnStatus.QUEUED.value, TurnStatus.RUNNING.value, to_db(t, "id", turn_id)])
        row = cursor.fetchone()
    if row is None:
        return None
    value = {name: from_db(t, name, v) for name, v in zip(_CLAIM_COLUMNS, row[: len(_CLAIM_COLUMNS)], strict=True)}
    return ClaimRow(
        id=value["id"],
        conversation_id=value["conversation"],
        ordinal=value["ordinal"],
        status=value["status"],
        lease_expires_at=value["lease_expires_at"],
        attempts=value["attempts"],
        attempts_without_progress=value["attempts_without_progress"],
        cancel_requested=bool(value["cancel_requested"]),
        started_at=value["started_at"],
        steps=value["steps"],
        conversation_state=row[-2],
        waits=bool(row[-1]),
    )


def turn_mark_running(
    *,
    turn_id: uuid.UUID,
    lease_token: str,
    lease_expires_at: datetime,
    without_progress: int,
    started_at: datetime,
    provider: str,
    model: str,
    started: dict[str, Any],
) -> int:
    """Give a locked turn to a new attempt and store its `started` event; return its sequence.

    On PostgreSQL one statement (every turn's start); elsewhere three.
    """
    t = Turn
    assignments = {
        "status": TurnStatus.RUNNING.value,
        "lease_token": lease_token,
        "lease_expires_at": lease_expires_at,
        "attempts_without_progress": without_progress,
        "started_at": started_at,
        "provider": provider,
        "model": model,
    }
    sets = ", ".join(f"{column(t, name)} = %s" for name in assignments)
    update = (
        f"UPDATE {table(t)} SET {sets}, {column(t, 'attempts')} = {column(t, 'attempts')} + 1"  # noqa: S608
        f" WHERE {column(t, 'id')} = %s"
    )
    params: list[Any] = [*(to_db(t, name, value) for name, value in assignments.items()), to_db(t, "id", turn_id)]
    connection = transaction.get_connection()
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(update, params)
        sequence = sequences_allocate(conversation_id=started["conversation_id"], count=1)
        rows_insert(Event, [{**started, "sequence": sequence}])
        return sequence
    event_sql, event_params, _ = insert_from_sql(Event, started, {"sequence": "s.sequence"}, "s")
    sql = (
        f"WITH u AS ({update} RETURNING 1), s(sequence) AS ({sequences_allocate_sql(after='u')}),"  # noqa: S608
        f" e AS ({event_sql}) SELECT sequence FROM s"
    )
    allocate = sequences_allocate_params(conversation_id=started["conversation_id"], count=1)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *allocate, *event_params])
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(started["conversation_id"])
    return int(row[0])


def transcript_until(
    *, conversation_id: uuid.UUID, ordinal: int, answer: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The conversation's messages up to a transcript ordinal, in order, as role and parts.

    With `answer`, that message row (the assistant's, after the ordinal) is inserted too:
    on PostgreSQL in the same statement.
    """
    m = Message
    select = (
        f"SELECT {column(m, 'role')}, {column(m, 'parts')} FROM {table(m)}"  # noqa: S608
        f" WHERE {column(m, 'conversation')} = %s AND {column(m, 'ordinal')} <= %s ORDER BY {column(m, 'ordinal')}"
    )
    params: list[Any] = [to_db(m, "conversation", conversation_id), ordinal]
    connection = transaction.get_connection()
    if answer is not None and connection.vendor == "postgresql":
        insert_sql, insert_params, _ = insert_from_sql(m, answer, {}, "(SELECT 1) AS one")
        select, params = f"WITH a AS ({insert_sql}) {select}", [*insert_params, *params]
    elif answer is not None:
        rows_insert(m, [answer])
    with connection.cursor() as cursor:
        cursor.execute(select, params)
        rows = cursor.fetchall()
    return [{"role": role, "parts": from_db(m, "parts", parts)} for role, parts in rows]


def turn_lease_held_sql(*, turn_id: str, lease_token: str, running: str) -> str:
    """An SQL condition: the turn (id `turn_id`) is running under this lease.

    The arguments are SQL expressions (placeholders or columns) of the composing statement;
    a streamed window is stored only where this holds.
    """
    t = Turn
    return (
        f"EXISTS (SELECT 1 FROM {table(t)} held WHERE held.{column(t, 'id')} = {turn_id}"  # noqa: S608
        f" AND held.{column(t, 'lease_token')} = {lease_token} AND held.{column(t, 'status')} = {running})"
    )


def turn_lock_owned(*, turn_id: uuid.UUID, lease_token: str) -> tuple[str, uuid.UUID] | None:
    """Lock a turn this lease owns; return its status and conversation, or None."""
    t = Turn
    connection = transaction.get_connection()
    sql = (
        f"SELECT {column(t, 'status')}, {column(t, 'conversation')} FROM {table(t)}"  # noqa: S608
        f" WHERE {column(t, 'id')} = %s AND {column(t, 'lease_token')} = %s"
    )
    if connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(sql, [to_db(t, "id", turn_id), lease_token])
        row = cursor.fetchone()
    return (row[0], from_db(t, "conversation", row[1])) if row else None


def turn_first_unfinished(*, conversation_id: uuid.UUID) -> tuple[uuid.UUID, str] | None:
    """The conversation's earliest queued or running turn: its id and status."""
    t = Turn
    sql = (
        f"SELECT {column(t, 'id')}, {column(t, 'status')} FROM {table(t)}"  # noqa: S608
        f" WHERE {column(t, 'conversation')} = %s AND {column(t, 'status')} IN (%s, %s)"
        f" ORDER BY {column(t, 'ordinal')} LIMIT 1"
    )
    params = [to_db(t, "conversation", conversation_id), TurnStatus.QUEUED.value, TurnStatus.RUNNING.value]
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return (from_db(t, "id", row[0]), row[1]) if row else None
