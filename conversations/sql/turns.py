"""A turn's rows: submitting it, ending it, and what an attempt of it reads when it starts.

Submitting reserves the conversation's next turn ordinal (`conversation_reserve_turn`, the
one allocator of turn ordinals; a browser task's projection takes its ordinal there too)
and one event sequence in the statement that checks the conversation and the request; on
PostgreSQL the whole submit is that one statement (`turn_submit`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.contrib.auth import get_user_model
from django.db import transaction

from conversations.models import (
    TURN_MESSAGES,
    Conversation,
    ConversationState,
    Event,
    InstructionOverride,
    Message,
    ModelConfiguration,
    ProviderKey,
    Turn,
    TurnStatus,
    user_message_ordinal,
)
from conversations.sql.sequences import sequence_first, sequences_advance_sql
from flarebot.core.models import Installation
from flarebot.core.rows import column, from_db, insert_from_sql, rows_insert, rows_update, table, to_db


class Reserved(NamedTuple):
    ordinal: int
    sequence: int  # the first of the reserved ones
    parent: uuid.UUID | None  # the shown branch's head before this turn: what the turn follows


def conversation_reserve_turn(
    *,
    conversation_id: uuid.UUID,
    request_id: uuid.UUID,
    turn_id: uuid.UUID,
    title: str,
    now: datetime,
    events: int = 1,
) -> Reserved | None:
    """Take the next turn ordinal and `events` event sequences of an active conversation.

    The one allocator of turn ordinals. The same statement moves the conversation to the
    top of the list (`updated_at` is `now`), makes `turn_id` the head of its shown branch
    (returning the head it replaces, which the turn follows) and, when this is its first
    turn and the owner never named it, names it `title`. Returns None when the
    conversation is not active or already has a turn for this request. Locks the
    conversation row until commit.
    """
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(_reserve_sql(events), _reserve_params(conversation_id, request_id, turn_id, title, now))
        row = cursor.fetchone()
    if not row:
        return None
    return Reserved(int(row[0]), sequence_first(int(row[1]), events), from_db(Conversation, "branch_head", row[2]))


@cache
def _reserve_sql(events: int = 1) -> str:
    c, t = Conversation, Turn
    ordinal, name = column(c, "last_turn_ordinal"), column(c, "name")
    head, head_parent = column(c, "branch_head"), column(c, "branch_head_parent")
    # SET expressions read the row as it was: an ordinal of 0 means no turn yet, and the
    # head's parent becomes the head that was (read again after a lock wait, unlike a
    # subquery, which keeps the statement's snapshot).
    return (
        f"UPDATE {table(c)} SET {ordinal} = {ordinal} + 1,"  # noqa: S608
        f" {head_parent} = {head}, {head} = %s,"
        f" {sequences_advance_sql(str(int(events)))},"
        f" {name} = CASE WHEN NOT {column(c, 'name_is_custom')} AND {ordinal} = 0 THEN %s ELSE {name} END,"
        f" {column(c, 'updated_at')} = %s"
        f" WHERE {column(c, 'id')} = %s AND {column(c, 'state')} = %s AND NOT EXISTS ("
        f"SELECT 1 FROM {table(t)} WHERE {column(t, 'conversation')} = %s AND {column(t, 'request_id')} = %s)"
        f" RETURNING {ordinal}, {column(c, 'last_sequence')}, {head_parent}"
    )


def _reserve_params(
    conversation_id: uuid.UUID, request_id: uuid.UUID, turn_id: uuid.UUID, title: str, now: datetime
) -> list[Any]:
    c = Conversation
    conversation = to_db(c, "id", conversation_id)
    return [
        to_db(c, "branch_head", turn_id),
        to_db(c, "name", title),
        to_db(c, "updated_at", now),
        conversation,
        ConversationState.ACTIVE.value,
        conversation,
        to_db(Turn, "request_id", request_id),
    ]


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
    caller's transaction usable. On SQLite it is `conversation_reserve_turn` and three
    inserts; on PostgreSQL the same in one statement (`_submit_in_one`), since every
    message the owner sends takes this path.
    """
    connection = transaction.get_connection()
    if connection.vendor != "postgresql":
        with transaction.atomic():
            reserved = conversation_reserve_turn(
                conversation_id=conversation_id, request_id=request_id, turn_id=turn["id"], title=title, now=now
            )
            if reserved is None:
                return None
            rows_insert(Turn, [{**turn, "ordinal": reserved.ordinal, "parent_turn_id": reserved.parent}])
            rows_insert(Message, [{**message, "ordinal": user_message_ordinal(reserved.ordinal)}])
            rows_insert(Event, [{**event, "sequence": reserved.sequence}])
        return reserved.ordinal, reserved.sequence
    sql, insert_params = _submit_in_one(turn, message, event)
    params = [*_reserve_params(conversation_id, request_id, turn["id"], title, now), *insert_params]
    # One statement reserves and inserts, a transaction by itself: BEGIN and COMMIT around
    # it would be two more round trips for every message sent. In a caller's transaction
    # it takes a savepoint, so that a raced duplicate leaves it usable.
    with transaction.atomic() if connection.in_atomic_block else nullcontext(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return (int(row[0]), int(row[1])) if row else None


def _submit_in_one(turn: dict[str, Any], message: dict[str, Any], event: dict[str, Any]) -> tuple[str, list[Any]]:
    """PostgreSQL: the reservation and the three inserts as one statement; the inserts' parameters."""
    turn_sql, turn_params, _ = insert_from_sql(Turn, turn, {"ordinal": "r.ordinal", "parent_turn_id": "r.parent"}, "r")
    # The user message's place, `models.user_message_ordinal`, in SQL.
    message_sql, message_params, _ = insert_from_sql(Message, message, {"ordinal": f"{TURN_MESSAGES} * r.ordinal"}, "r")
    event_sql, event_params, _ = insert_from_sql(Event, event, {"sequence": "r.sequence"}, "r")
    sql = (
        f"WITH r(ordinal, sequence, parent) AS ({_reserve_sql()}), t AS ({turn_sql}), m AS ({message_sql}),"  # noqa: S608
        f" e AS ({event_sql}) SELECT ordinal, sequence FROM r"
    )
    return sql, [*turn_params, *message_params, *event_params]


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


def transcript_until(
    *, conversation_id: uuid.UUID, ordinal: int, answer: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The conversation's messages up to a transcript ordinal, in order, as role and parts.

    With `answer`, that message row (the assistant's, after the ordinal) is inserted too:
    on PostgreSQL in the same statement.
    """
    m, t = Message, Turn
    # Only the shown branch of versions (conversations.versions): a turn's own branch, since
    # the branch shown does not change while a turn is unfinished.
    select = (
        f"SELECT {column(m, 'role')}, {column(m, 'parts')} FROM {table(m)}"  # noqa: S608
        f" WHERE {column(m, 'conversation')} = %s AND {column(m, 'ordinal')} <= %s"
        f" AND EXISTS (SELECT 1 FROM {table(t)} WHERE {table(t)}.{column(t, 'id')} = {table(m)}.{column(m, 'turn')}"
        f" AND {table(t)}.{column(t, 'shown')}) ORDER BY {column(m, 'ordinal')}"
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
