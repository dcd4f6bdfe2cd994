"""Who may run a turn: the lease rules as SQL conditions, the claim, and the lease's renewals.

`_lease_over_sql` is the one predicate of a turn's lease: the claim, recovery
(`turns_claimable`), the doorbell's check (`turns_lease_over`) and a deletion's wait
(`turns_held`) all compose it. A streamed write checks its lease with `turn_lease_held_sql`
in the statement that stores it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from conversations.events import EventKind, turn_started_data
from conversations.models import Conversation, ConversationState, Event, Turn, TurnStatus
from conversations.sql.sequences import sequences_allocate, sequences_allocate_sql
from flarebot.core.rows import column, from_db, insert_from_sql, rows_insert, rows_update, table, to_db

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


def turns_held(*, conversation_id: uuid.UUID, now: datetime) -> bool:
    """Whether a live attempt holds some turn of the conversation (a running one whose lease is not over)."""
    t = Turn
    over, params = _lease_over_sql("t", now)
    sql = (
        f"SELECT 1 FROM {table(t)} t WHERE t.{column(t, 'conversation')} = %s"  # noqa: S608
        f" AND t.{column(t, 'status')} = %s AND NOT {over} LIMIT 1"
    )
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, [to_db(t, "conversation", conversation_id), TurnStatus.RUNNING.value, *params])
        return cursor.fetchone() is not None


def turn_lease_set(*, turn_id: uuid.UUID, lease_token: str, expires_at: datetime | None) -> bool:
    """Move the end of a lease this attempt holds (None releases it now); False if it no longer holds it."""
    t = Turn
    # The condition names the updated row itself. (`turn_lease_held_sql` is an EXISTS over
    # another row: as this statement's whole condition it would hold for every row of the
    # table and move every turn's lease.)
    sql = (
        f"UPDATE {table(t)} SET {column(t, 'lease_expires_at')} = %s"  # noqa: S608
        f" WHERE {column(t, 'id')} = %s AND {column(t, 'lease_token')} = %s AND {column(t, 'status')} = %s"
    )
    params = [to_db(t, "lease_expires_at", expires_at), to_db(t, "id", turn_id), lease_token, TurnStatus.RUNNING.value]
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount == 1


def turn_progress_record(*, turn_id: uuid.UUID, lease_token: str) -> None:
    """The attempt produced output: the count of attempts without progress starts over."""
    rows_update(Turn, {"id": turn_id, "lease_token": lease_token}, {"attempts_without_progress": 0})


def turn_lease_held_sql(*, turn_id: str, lease_token: str, running: str) -> str:
    """An SQL condition: the turn (id `turn_id`) is running under this lease.

    The arguments are SQL expressions (placeholders or columns) of the composing statement;
    a streamed window is stored only where this holds. It is a condition on another row
    (the turn), for statements whose own condition names the row they write (a message by
    its id): on its own it would hold for every row of the table.
    """
    t = Turn
    return (
        f"EXISTS (SELECT 1 FROM {table(t)} held WHERE held.{column(t, 'id')} = {turn_id}"  # noqa: S608
        f" AND held.{column(t, 'lease_token')} = {lease_token} AND held.{column(t, 'status')} = {running})"
    )
