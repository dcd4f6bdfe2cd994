"""The statements of a turn's hot path, in plain SQL (see flarebot.core.rows for why).

Each function is one step of the path and holds no rule: `turns` and the engine decide
what the rows mean. A step is one statement on PostgreSQL (data-modifying CTEs) and the
same rows statement by statement on SQLite. They run inside the caller's transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.db import transaction

from conversations.eventlog import sequences_allocate, sequences_allocate_sql
from conversations.events import EventKind, turn_started_data
from conversations.models import Conversation, ConversationState, Event, Message, Turn, TurnStatus
from flarebot.core.rows import column, from_db, insert_from_sql, rows_insert, rows_update, table, to_db


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


# The rules of who may run a turn, as SQL conditions over a turn row aliased `alias`;
# `turns` decides with them, and every statement below that needs one composes it.


def _lease_over_sql(alias: str, now: datetime) -> tuple[str, list[Any]]:
    """No live attempt holds the turn: it is queued, or running on a lease that ran out."""
    t = Turn
    status, expires = f"{alias}.{column(t, 'status')}", f"{alias}.{column(t, 'lease_expires_at')}"
    sql = f"({status} = %s OR ({status} = %s AND ({expires} IS NULL OR {expires} <= %s)))"
    return sql, [TurnStatus.QUEUED.value, TurnStatus.RUNNING.value, to_db(t, "lease_expires_at", now)]


def _claimable_sql(alias: str, now: datetime) -> tuple[str, list[Any]]:
    """The lease is over and no earlier turn of the conversation is unfinished."""
    t = Turn
    over, params = _lease_over_sql(alias, now)
    sql = (
        f"{over} AND NOT EXISTS (SELECT 1 FROM {table(t)} e"  # noqa: S608
        f" WHERE e.{column(t, 'conversation')} = {alias}.{column(t, 'conversation')}"
        f" AND e.{column(t, 'ordinal')} < {alias}.{column(t, 'ordinal')} AND e.{column(t, 'status')} IN (%s, %s))"
    )
    return sql, [*params, TurnStatus.QUEUED.value, TurnStatus.RUNNING.value]


def _may_start_sql(alias: str, limits: AttemptLimits) -> tuple[str, list[Any]]:
    """Another attempt may start: not cancelled, its conversation active, within the attempt budget."""
    t, c = Turn, Conversation
    sql = (
        f"{alias}.{column(t, 'cancel_requested')} = %s AND EXISTS (SELECT 1 FROM {table(c)} c"  # noqa: S608
        f" WHERE c.{column(c, 'id')} = {alias}.{column(t, 'conversation')} AND c.{column(c, 'state')} = %s)"
        f" AND {_within_budget_sql(alias)}"
    )
    params = [to_db(t, "cancel_requested", False), ConversationState.ACTIVE.value, *_within_budget_params(limits)]
    return sql, params


def _within_budget_sql(alias: str) -> str:
    t = Turn
    return (
        f"{alias}.{column(t, 'attempts')} < %s AND {alias}.{column(t, 'attempts_without_progress')}"
        f" + {_recovering_sql(alias)} < %s"
    )


def _within_budget_params(limits: AttemptLimits) -> list[Any]:
    return [limits.attempts, TurnStatus.RUNNING.value, limits.without_progress]


def _recovering_sql(alias: str) -> str:
    """1 when the turn was running (its last attempt ended without finishing it), else 0."""
    return f"CASE WHEN {alias}.{column(Turn, 'status')} = %s THEN 1 ELSE 0 END"


@dataclass(frozen=True)
class AttemptLimits:
    attempts: int  # attempts in all
    without_progress: int  # attempts in a row that ended without new output


@dataclass(frozen=True)
class Claimed:
    """A turn just given to an attempt, with the sequence of its `turn.started` event."""

    turn_id: uuid.UUID
    conversation_id: uuid.UUID
    ordinal: int
    attempt: int
    steps: int
    sequence: int


_CLAIMED_COLUMNS = ("id", "conversation", "ordinal", "attempts", "steps")


def turn_claim_running(
    *,
    turn_id: uuid.UUID,
    lease_token: str,
    now: datetime,
    lease_expires_at: datetime,
    provider: str,
    model: str,
    limits: AttemptLimits,
) -> Claimed | None:
    """The claim: one conditional UPDATE gives a claimable turn that may start to this lease.

    It counts the attempt (and, for a turn whose last attempt ended unfinished, one more
    attempt without progress), and stores its `turn.started` event with
    the next sequence. None when the turn is owned, must wait, is finished, or may not
    start again (see `turn_lock_unclaimed`). On PostgreSQL one statement; elsewhere three.
    """
    t = Turn
    assignments = {
        "status": TurnStatus.RUNNING.value,
        "lease_token": lease_token,
        "lease_expires_at": lease_expires_at,
        "provider": provider,
        "model": model,
    }
    sets = ", ".join(f"{column(t, name)} = %s" for name in assignments)
    claimable, claimable_params = _claimable_sql("t", now)
    may_start, may_start_params = _may_start_sql("t", limits)
    returned = ", ".join(column(t, name) for name in _CLAIMED_COLUMNS)  # SQLite: no alias here
    update = (
        f"UPDATE {table(t)} AS t SET {sets}, {column(t, 'attempts')} = t.{column(t, 'attempts')} + 1,"  # noqa: S608
        f" {column(t, 'attempts_without_progress')} = t.{column(t, 'attempts_without_progress')}"
        f" + {_recovering_sql('t')}, {column(t, 'started_at')} = COALESCE(t.{column(t, 'started_at')}, %s)"
        f" WHERE t.{column(t, 'id')} = %s AND {claimable} AND {may_start} RETURNING {returned}"
    )
    params: list[Any] = [
        *(to_db(t, name, value) for name, value in assignments.items()),
        TurnStatus.RUNNING.value,
        to_db(t, "started_at", now),
        to_db(t, "id", turn_id),
        *claimable_params,
        *may_start_params,
    ]
    connection = transaction.get_connection()
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(update, params)
            row = cursor.fetchone()
        if row is None:
            return None
        value = _claimed_values(row)
        sequence = sequences_allocate(conversation_id=value["conversation"], count=1)
        data = turn_started_data(attempt=value["attempts"])
        event = {"conversation_id": value["conversation"], "turn_id": turn_id, "kind": EventKind.TURN_STARTED}
        rows_insert(Event, [{**event, "sequence": sequence, "data": data}])
        return _claimed(value, sequence)
    event = {"turn_id": turn_id, "kind": EventKind.TURN_STARTED}
    # turn.started's data (events.turn_started_data), built from the attempt the UPDATE counted.
    [attempt_key] = turn_started_data(attempt=0)
    assert attempt_key.isidentifier()
    computed = {
        "conversation_id": "u.conversation",
        "sequence": "s.sequence",
        "data": f"jsonb_build_object('{attempt_key}', u.attempts)",
    }
    event_sql, event_params, _ = insert_from_sql(Event, event, computed, "u, s")
    allocate = sequences_allocate_sql(count="1", conversation="u.conversation", source="u")
    sql = (
        f"WITH u(id, conversation, ordinal, attempts, steps) AS ({update}), s(sequence) AS ({allocate}),"  # noqa: S608
        f" e AS ({event_sql}) SELECT u.id, u.conversation, u.ordinal, u.attempts, u.steps, s.sequence FROM u, s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *event_params])
        row = cursor.fetchone()
    if row is None:
        return None
    return _claimed(_claimed_values(row[:-1]), int(row[-1]))


def _claimed_values(row: Sequence[Any]) -> dict[str, Any]:
    return {name: from_db(Turn, name, v) for name, v in zip(_CLAIMED_COLUMNS, row, strict=True)}


def _claimed(value: dict[str, Any], sequence: int) -> Claimed:
    return Claimed(
        turn_id=value["id"],
        conversation_id=value["conversation"],
        ordinal=value["ordinal"],
        attempt=value["attempts"],
        steps=value["steps"],
        sequence=sequence,
    )


@dataclass(frozen=True)
class Unclaimed:
    """A claimable turn that may not start again, and why."""

    conversation_id: uuid.UUID
    stopped: bool  # cancelled by the owner, or its conversation is being deleted
    over_budget: bool


def turn_lock_unclaimed(*, turn_id: uuid.UUID, now: datetime, limits: AttemptLimits) -> Unclaimed | None:
    """Lock a claimable turn that the claim refused; None if it is owned, waits or is finished."""
    t, c = Turn, Conversation
    claimable, claimable_params = _claimable_sql("t", now)
    connection = transaction.get_connection()
    sql = (
        f"SELECT t.{column(t, 'conversation')}, t.{column(t, 'cancel_requested')}, c.{column(c, 'state')},"  # noqa: S608
        f" CASE WHEN {_within_budget_sql('t')} THEN 1 ELSE 0 END"
        f" FROM {table(t)} t JOIN {table(c)} c ON c.{column(c, 'id')} = t.{column(t, 'conversation')}"
        f" WHERE t.{column(t, 'id')} = %s AND {claimable}"
    )
    if connection.features.has_select_for_update_of:
        sql += " FOR UPDATE OF t"
    params = [*_within_budget_params(limits), to_db(t, "id", turn_id), *claimable_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    conversation, cancel_requested, state, within_budget = row
    return Unclaimed(
        conversation_id=from_db(t, "conversation", conversation),
        stopped=bool(cancel_requested) or state != ConversationState.ACTIVE,
        over_budget=not within_budget,
    )


def turns_claimable(*, now: datetime, queued_before: datetime, limit: int) -> list[uuid.UUID]:
    """Turns a worker could claim now: running on a lease that ran out, or queued since before
    `queued_before` (a fresh one is still on its way to a worker)."""
    t = Turn
    claimable, params = _claimable_sql("t", now)
    sql = (
        f"SELECT t.{column(t, 'id')} FROM {table(t)} t WHERE {claimable}"  # noqa: S608
        f" AND (t.{column(t, 'status')} = %s OR t.{column(t, 'created_at')} < %s) LIMIT %s"
    )
    params += [TurnStatus.RUNNING.value, to_db(t, "created_at", queued_before), limit]
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return [from_db(t, "id", row[0]) for row in cursor.fetchall()]


def turns_lease_over(*, turn_ids: Sequence[uuid.UUID], now: datetime) -> set[uuid.UUID]:
    """Which of these turns no live attempt holds."""
    if not turn_ids:
        return set()
    t = Turn
    over, params = _lease_over_sql("t", now)
    ids = ", ".join(["%s"] * len(turn_ids))
    sql = f"SELECT t.{column(t, 'id')} FROM {table(t)} t WHERE t.{column(t, 'id')} IN ({ids}) AND {over}"  # noqa: S608
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, [*(to_db(t, "id", turn_id) for turn_id in turn_ids), *params])
        return {from_db(t, "id", row[0]) for row in cursor.fetchall()}


def turn_lease_set(*, turn_id: uuid.UUID, lease_token: str, expires_at: datetime | None) -> bool:
    """Move the end of a lease this attempt holds (None releases it now); False if it no longer holds it."""
    t = Turn
    held = turn_lease_held_sql(turn_id="%s", lease_token="%s", running="%s")
    sql = f"UPDATE {table(t)} SET {column(t, 'lease_expires_at')} = %s WHERE {held}"  # noqa: S608
    params = [to_db(t, "lease_expires_at", expires_at), to_db(t, "id", turn_id), lease_token, TurnStatus.RUNNING.value]
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def turn_progress_record(*, turn_id: uuid.UUID, lease_token: str) -> None:
    """The attempt produced output: the count of attempts without progress starts over."""
    rows_update(Turn, {"id": turn_id, "lease_token": lease_token}, {"attempts_without_progress": 0})


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
