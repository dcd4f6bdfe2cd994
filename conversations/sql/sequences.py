"""The event log's sequence allocator: one statement that moves the conversation's `last_sequence`.

Every path that writes events reserves its sequences here (`eventlog` exposes it), or
composes `sequences_allocate_sql` into its own statement, or moves the counter with
`sequences_advance_sql` in a statement that reserves something else too (a submit). The
update locks the conversation row until commit, so concurrent writers get consecutive
ranges and commit them in order.
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from django.db import transaction

from conversations.models import Conversation
from flarebot.core.rows import column, table, to_db


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


def sequences_advance_sql(count: str, *, qualified: bool = False) -> str:
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
    """The allocator's statement, which every path that writes events uses (a submit moves the
    same counter with `sequences_advance_sql`): it returns the last sequence reserved (then `returning`).

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
        f"UPDATE {name} SET {sequences_advance_sql(count, qualified=True)}{source_sql}"  # noqa: S608
        f" WHERE {name}.{column(c, 'id')} = {conversation}{guard} RETURNING {name}.{last}{extra}"
    )


def sequences_allocate_params(*, conversation_id: uuid.UUID, count: int) -> list[Any]:
    return [count, to_db(Conversation, "id", conversation_id)]
