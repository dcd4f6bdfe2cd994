"""Streamed windows: an answer's parts with their lease check, sequences and events.

This runs for every window of every stream. On PostgreSQL a window is one statement
(`message_parts_store_and_allocate_sql`), and a batch of them from the engine loop's own
connection is one statement too (`stream_batch_sql`, `engine/stream_store.py`).
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from conversations.models import Event, Message, Turn, TurnStatus
from conversations.sql.claim import turn_lease_held_sql
from conversations.sql.sequences import (
    sequence_first,
    sequences_allocate,
    sequences_allocate_params,
    sequences_allocate_sql,
)
from flarebot.core.rows import column, insert_select_sql, table, to_db


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
