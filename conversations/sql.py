"""Every hand-written SQL statement of the conversations app (see flarebot.core.rows for why).

They are the hot path's: submitting, claiming, streamed windows, the sequence allocator,
the settings a turn starts from. Each function is one statement (or its builder) and holds
no rule: `turns`, the event log and the engine decide what the rows mean. Column names
come from the models. A step is one statement on PostgreSQL (data-modifying CTEs) and the
same rows statement by statement on SQLite; vendor branches stay in this module. They run
inside the caller's transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils import timezone

from conversations.events import EventKind, turn_started_data
from conversations.models import (
    TURN_MESSAGES,
    Conversation,
    ConversationState,
    Event,
    InstructionOverride,
    Message,
    ModelConfiguration,
    ProviderKey,
    SearchEntry,
    Turn,
    TurnStatus,
    user_message_ordinal,
)
from flarebot.core.models import Installation
from flarebot.core.rows import (
    column,
    from_db,
    insert_from_sql,
    insert_select_sql,
    rows_insert,
    rows_update,
    table,
    to_db,
)


def conversation_reserve_turn(
    *, conversation_id: uuid.UUID, request_id: uuid.UUID, title: str, now: datetime, events: int = 1
) -> tuple[int, int] | None:
    """Take the next turn ordinal and `events` event sequences of an active conversation.

    The one allocator of turn ordinals. The same statement moves the conversation to the
    top of the list (`updated_at` is `now`) and, when this is its first turn and the owner
    never named it, names it `title`. Returns (ordinal, first sequence), or None when the
    conversation is not active or already has a turn for this request. Locks the
    conversation row until commit.
    """
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(_reserve_sql(events), _reserve_params(conversation_id, request_id, title, now))
        row = cursor.fetchone()
    return (int(row[0]), sequence_first(int(row[1]), events)) if row else None


@cache
def _reserve_sql(events: int = 1) -> str:
    c, t = Conversation, Turn
    ordinal, name = column(c, "last_turn_ordinal"), column(c, "name")
    # SET expressions read the row as it was: an ordinal of 0 means no turn yet.
    return (
        f"UPDATE {table(c)} SET {ordinal} = {ordinal} + 1,"  # noqa: S608
        f" {_sequences_advance_sql(str(int(events)))},"
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
    """PostgreSQL: `turn_submit` in one statement.

    The same as `conversation_reserve_turn` followed by the three inserts (what SQLite
    does), in one round trip: every message the owner sends takes this path.
    """
    turn_sql, turn_params, _ = insert_from_sql(Turn, turn, {"ordinal": "r.ordinal"}, "r")
    # The user message's place, `models.user_message_ordinal`, in SQL.
    message_sql, message_params, _ = insert_from_sql(Message, message, {"ordinal": f"{TURN_MESSAGES} * r.ordinal"}, "r")
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


def turn_submit(
    *,
    conversation_id: uuid.UUID,
    request_id: uuid.UUID,
    title: str,
    now: datetime,
    turn: dict[str, Any],
    message: dict[str, Any],
    event: dict[str, Any],
) -> tuple[int, int] | None:
    """Reserve a turn's ordinal and sequence and insert its turn, user message and `turn.queued` event.

    The rows come complete but for the turn's and message's ordinals and the event's
    sequence. Returns (ordinal, sequence), or None when nothing was reserved (nor
    inserted). A raced duplicate of the request raises IntegrityError and leaves the
    caller's transaction usable.
    """
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        # One statement reserves and inserts, a transaction by itself: BEGIN and COMMIT
        # around it would be two more round trips for every message sent. In a caller's
        # transaction it takes a savepoint, so that a raced duplicate leaves it usable.
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            return turn_submit_in_one(
                conversation_id=conversation_id,
                request_id=request_id,
                title=title,
                now=now,
                turn=turn,
                message=message,
                event=event,
            )
    with transaction.atomic():
        reserved = conversation_reserve_turn(
            conversation_id=conversation_id, request_id=request_id, title=title, now=now
        )
        if reserved is not None:
            ordinal, sequence = reserved
            rows_insert(Turn, [{**turn, "ordinal": ordinal}])
            rows_insert(Message, [{**message, "ordinal": user_message_ordinal(ordinal)}])
            rows_insert(Event, [{**event, "sequence": sequence}])
    return reserved


def turn_end_set(*, turn_id: uuid.UUID, status: str, code: str, message: str, now: datetime) -> None:
    """Store a locked turn's terminal status and error, and let its lease go."""
    rows_update(
        Turn,
        {"id": turn_id},
        {
            "status": status,
            "error_code": code,
            "error_message": message,
            "finished_at": now,
            "lease_token": "",
            "lease_expires_at": None,
        },
    )


def turn_steps_set(*, turn_id: uuid.UUID, lease_token: str, steps: int) -> None:
    """Store how many model steps of the answer this lease completed."""
    rows_update(Turn, {"id": turn_id, "lease_token": lease_token}, {"steps": steps})


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
    a streamed window is stored only where this holds. It is a condition on another row
    (the turn), for statements whose own condition names the row they write (a message by
    its id): on its own it would hold for every row of the table.
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


# The event log's sequence allocator (`eventlog` exposes it; every path that writes events uses it).


def sequences_allocate(*, conversation_id: uuid.UUID, count: int) -> int:
    """Reserve `count` sequences in the caller's transaction and return the first.

    The update locks the conversation row until commit, so concurrent writers get
    consecutive ranges and commit them in order.
    """
    connection = transaction.get_connection()
    assert connection.in_atomic_block, "sequences are allocated inside the writer's transaction"
    with connection.cursor() as cursor:
        cursor.execute(
            sequences_allocate_sql(), sequences_allocate_params(conversation_id=conversation_id, count=count)
        )
        row = cursor.fetchone()
    if row is None:
        raise Conversation.DoesNotExist(conversation_id)
    return sequence_first(int(row[0]), count)


def sequence_first(last: int, count: int) -> int:
    """The first of `count` sequences an allocation reserved, from the last one it returned."""
    return last - count + 1


def _sequences_advance_sql(count: str, *, qualified: bool = False) -> str:
    """The allocator's assignment, in every statement that reserves sequences: `last_sequence` moves on by `count`.

    `qualified` names the column by its table, for a statement whose FROM may have a column
    of the same name.
    """
    c = Conversation
    last = column(c, "last_sequence")
    return f"{last} = {table(c)}.{last} + {count}" if qualified else f"{last} = {last} + {count}"


@cache
def sequences_allocate_sql(
    *,
    after: str | None = None,
    count: str = "%s",
    conversation: str = "%s",
    source: str | None = None,
    returning: tuple[str, ...] = (),
) -> str:
    """The allocator's statement, which every path that writes events uses: it returns the last
    sequence reserved (then `returning`).

    By default it takes the count and the conversation as parameters. A composed statement
    (CTEs) may pass SQL expressions instead, over `source` (its FROM), and with `after`, the
    name of an earlier part, it reserves only if that part returned a row.
    """
    c = Conversation
    # Qualified by the table's name: a `source` may have columns of the same names.
    last, name = column(c, "last_sequence"), table(c)
    guard = f" AND EXISTS (SELECT 1 FROM {after})" if after else ""  # noqa: S608
    source_sql = f" FROM {source}" if source else ""
    extra = "".join(f", {expression}" for expression in returning)
    return (
        f"UPDATE {name} SET {_sequences_advance_sql(count, qualified=True)}{source_sql}"  # noqa: S608
        f" WHERE {name}.{column(c, 'id')} = {conversation}{guard} RETURNING {name}.{last}{extra}"
    )


def sequences_allocate_params(*, conversation_id: uuid.UUID, count: int) -> list[Any]:
    return [count, to_db(Conversation, "id", conversation_id)]


# Streamed windows.


def message_parts_store(
    *,
    conversation_id: uuid.UUID,
    message_id: uuid.UUID,
    parts: list[dict[str, Any]],
    turn_id: uuid.UUID,
    lease_token: str,
    events: int,
) -> int | None:
    """Store an answer's parts if this lease still holds its turn and reserve `events` sequences.

    Returns the first sequence, or None when the attempt lost the turn (or the conversation
    is gone). One statement on PostgreSQL: this runs for every window of every stream.
    """
    connection = transaction.get_connection()
    owned = [
        to_db(Message, "parts", parts),
        to_db(Message, "id", message_id),
        to_db(Turn, "id", turn_id),
        lease_token,
        TurnStatus.RUNNING.value,
    ]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            allocate = sequences_allocate_params(conversation_id=conversation_id, count=events)
            cursor.execute(message_parts_store_and_allocate_sql(), [*owned, *allocate])
            row = cursor.fetchone()
        return None if row is None else sequence_first(int(row[0]), events)
    with connection.cursor() as cursor:
        cursor.execute(message_parts_store_sql(), owned)
        if cursor.rowcount != 1:
            return None
    return sequences_allocate(conversation_id=conversation_id, count=events)


@cache
def message_parts_store_sql() -> str:
    m = Message
    held = turn_lease_held_sql(turn_id="%s", lease_token="%s", running="%s")
    return f"UPDATE {table(m)} SET {column(m, 'parts')} = %s WHERE {column(m, 'id')} = %s AND {held}"  # noqa: S608


@cache
def message_parts_store_and_allocate_sql() -> str:
    """PostgreSQL: the parts and the sequences in one statement (one round trip per write)."""
    return f"WITH stored AS ({message_parts_store_sql()} RETURNING 1) {sequences_allocate_sql(after='stored')}"


@cache
def stream_batch_sql() -> str:
    """Store each write's parts if its attempt still owns the turn, then its sequences and events.

    The writes come as one JSON document: its text is the same for every batch size, so
    PostgreSQL prepares it once per connection, and sending one text costs the worker a
    fraction of what adapting arrays of values did.
    """
    m = Message
    held = turn_lease_held_sql(turn_id="w.turn_id", lease_token="w.lease_token", running="%(running)s")
    allocate = sequences_allocate_sql(
        count="jsonb_array_length(s.events)",
        conversation="s.conversation_id",
        source="stored s",
        returning=("s.idx", "s.conversation_id", "s.events"),
    )
    inserted = insert_select_sql(
        Event,
        {
            "id": "gen_random_uuid()",
            "created_at": "%(now)s",
            "updated_at": "%(now)s",
            "conversation_id": "a.conversation_id",
            "sequence": "a.last - jsonb_array_length(a.events) + e.position",
            "kind": "e.value->>'kind'",
            "turn_id": "(e.value->>'turn_id')::uuid",
            "data": "e.value->'data'",
        },
        "allocated a CROSS JOIN LATERAL jsonb_array_elements(a.events) WITH ORDINALITY AS e(value, position)",
    )
    return (
        "WITH w AS (SELECT * FROM json_to_recordset(%(writes)s::json)"  # noqa: S608 (names from the models)
        " AS w(idx int, message_id uuid, parts jsonb, turn_id uuid, lease_token text, conversation_id uuid,"
        " events jsonb)),"
        f" stored AS (UPDATE {table(m)} m SET {column(m, 'parts')} = w.parts FROM w"
        f" WHERE m.{column(m, 'id')} = w.message_id AND {held} RETURNING w.idx, w.conversation_id, w.events),"
        f" allocated(last, idx, conversation_id, events) AS ({allocate}),"
        f" inserted AS ({inserted})"
        " SELECT idx, last - jsonb_array_length(events) FROM allocated"
    )


# The settings a turn starts from.


def turn_settings_row(*, providers: Sequence[str]) -> tuple[Any, ...]:
    """Configuration, the sealed key of each provider, the instructions override and the
    installation with its owner, in one row (one statement: every turn's start reads it)."""
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(_turn_settings_sql(len(providers)), list(providers))
        return tuple(cursor.fetchone())


@cache
def _turn_settings_sql(providers: int) -> str:
    config, keys, override, inst = ModelConfiguration, ProviderKey, InstructionOverride, Installation
    user = get_user_model()
    sealed = ", ".join(
        f"(SELECT {column(keys, 'sealed')} FROM {table(keys)} WHERE {column(keys, 'provider')} = %s)"  # noqa: S608
        for _ in range(providers)
    )
    return (
        f"SELECT (SELECT {column(config, 'provider')} FROM {table(config)}),"  # noqa: S608
        f" (SELECT {column(config, 'model')} FROM {table(config)}), {sealed},"
        f" (SELECT {column(override, 'text')} FROM {table(override)}), (SELECT count(*) FROM {table(inst)}),"
        f" i.{column(inst, 'installation_id')}, i.{column(inst, 'schema_version')}, i.{column(inst, 'owner_username')},"
        f" u.{column(user, user.USERNAME_FIELD)}, u.{column(user, 'is_active')}"
        f" FROM (SELECT 1 AS one) AS one LEFT JOIN {table(inst)} i ON 1 = 1"
        f" LEFT JOIN {table(user)} u ON u.{column(user, 'id')} = i.{column(inst, 'owner')} LIMIT 1"
    )


def synchronous_commit_off_for_transaction() -> None:
    """PostgreSQL: let this transaction commit without waiting for its WAL flush (batcher.py says why).

    Elsewhere nothing: SQLite commits as its settings say.
    """
    connection = transaction.get_connection()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


# The engine loop's own PostgreSQL connection for `stream_batch_sql` (engine/stream_store.py).

# Settings Django passes to psycopg that only Django's own (synchronous) cursors understand.
_DJANGO_ONLY_PARAMS = ("cursor_factory", "context")
# Its sessions commit without waiting for the WAL flush, as the threaded path's transactions.
STREAM_SESSION_SETUP = "SET synchronous_commit TO off"


def stream_connection_params() -> dict[str, Any] | None:
    """The psycopg settings of a connection to the configured database if it is PostgreSQL; None otherwise."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "postgresql":
        return None
    params = connection.get_connection_params()
    for name in _DJANGO_ONLY_PARAMS:
        params.pop(name, None)
    return params


# Conversation search (the index is the migration's `0006_search_index`).

SQLITE_SEARCH_TABLE = "conversations_search"
POSTGRESQL_SEARCH_COLUMN = "search"


def search_entries_upsert(*, conversation_id: uuid.UUID, entries: Sequence[tuple[uuid.UUID | None, str]]) -> None:
    """Store the searchable text of messages (or, with None, of the conversation's name); replace what was there."""
    s = SearchEntry
    now = timezone.now()
    with transaction.get_connection().cursor() as cursor:
        for message_id, text in entries:
            target = (
                f"({column(s, 'message')})"
                if message_id is not None
                else f"({column(s, 'conversation')}) WHERE {column(s, 'message')} IS NULL"
            )
            cursor.execute(
                f"INSERT INTO {table(s)} ({column(s, 'id')}, {column(s, 'created_at')}, {column(s, 'updated_at')},"  # noqa: S608
                f" {column(s, 'conversation')}, {column(s, 'message')}, {column(s, 'text')})"
                f" VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT {target}"
                f" DO UPDATE SET {column(s, 'text')} = excluded.{column(s, 'text')},"
                f" {column(s, 'updated_at')} = excluded.{column(s, 'updated_at')}"
                # Unchanged text (a name indexed again as each turn ends) is not rewritten.
                f" WHERE {table(s)}.{column(s, 'text')} <> excluded.{column(s, 'text')}",
                [
                    to_db(s, "id", uuid.uuid4()),
                    to_db(s, "created_at", now),
                    to_db(s, "updated_at", now),
                    to_db(s, "conversation", conversation_id),
                    to_db(s, "message", message_id),
                    text,
                ],
            )


@dataclass(frozen=True)
class SearchHit:
    conversation_id: uuid.UUID
    message_id: uuid.UUID | None
    snippet: str


def search_entries_match(*, tokens: Sequence[str], limit: int) -> list[SearchHit]:
    """Entries of active conversations matching any token, best first, each with a plain-text snippet."""
    if not tokens:
        return []
    s, c = SearchEntry, Conversation
    conversation, message = column(s, "conversation"), column(s, "message")
    active = f"JOIN {table(c)} c ON c.{column(c, 'id')} = e.{conversation} AND c.{column(c, 'state')} = %s"
    connection = transaction.get_connection()
    if connection.vendor == "sqlite":
        search = f'"{SQLITE_SEARCH_TABLE}"'
        match = " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)
        sql = (
            f"SELECT e.{conversation}, e.{message}, m.snip FROM ("  # noqa: S608
            f"SELECT rowid, rank, snippet({search}, 1, '', '', '…', 24) AS snip FROM {search}"
            f" WHERE {search} MATCH %s ORDER BY rank LIMIT %s) AS m"
            f" JOIN {table(s)} e ON e.rowid = m.rowid {active} ORDER BY m.rank, e.{column(s, 'id')} LIMIT %s"
        )
        # More than `limit` candidates: some may belong to conversations being deleted.
        params: list[Any] = [match, limit * 4, ConversationState.ACTIVE.value, limit]
    elif connection.vendor == "postgresql":
        vector = f'e."{POSTGRESQL_SEARCH_COLUMN}"'
        either = " || ".join(["plainto_tsquery('english', %s)"] * len(tokens))
        options = 'StartSel="",StopSel="",MaxWords=24,MinWords=8,MaxFragments=1,FragmentDelimiter=" … "'
        sql = (
            f"WITH terms AS MATERIALIZED (SELECT {either} AS q), hits AS ("  # noqa: S608
            f"SELECT e.{conversation} AS conversation, e.{message} AS message, e.{column(s, 'text')} AS text,"
            f" ts_rank({vector}, terms.q) AS rank, e.{column(s, 'id')} AS id FROM terms, {table(s)} e {active}"
            f" WHERE {vector} @@ terms.q ORDER BY rank DESC, id LIMIT %s)"
            f" SELECT conversation, message, ts_headline('english', text, terms.q, %s) FROM hits, terms"
            f" ORDER BY rank DESC, id"
        )
        params = [*tokens, ConversationState.ACTIVE.value, limit, options]
    else:
        raise NotImplementedError(f"conversation search on {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        SearchHit(from_db(s, "conversation", row[0]), from_db(s, "message", row[1]), " ".join(row[2].split()))
        for row in rows
    ]
