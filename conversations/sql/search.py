"""Conversation search: the entries of names and messages, and their full-text match.

The structures are the migration's (`0006_search_index`): an FTS5 table on SQLite, a
`tsvector` column on PostgreSQL; each vendor's query is here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from conversations.models import Conversation, ConversationState, Message, SearchEntry, Turn
from flarebot.core.rows import column, from_db, table, to_db

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


# Where a snippet marks a matched word (private-use characters, removed from indexed text).
MARK_START, MARK_END = "\ue000", "\ue001"


@dataclass(frozen=True)
class SearchHit:
    conversation_id: uuid.UUID
    message_id: uuid.UUID | None
    snippet: str  # plain text, with each matched word between MARK_START and MARK_END
    matches: int  # how many entries of the conversation matched (its name counts as one)


def search_entries_match(*, tokens: Sequence[str], limit: int) -> list[SearchHit]:
    """The best matching entry of each active conversation matching any token, best first.

    One row per conversation (its best entry, with a snippet, and how many of its entries
    matched), at most `limit`: window functions rank the entries within each conversation.
    Of a name and a message that match as well (a title is its first message's words), the
    message is the better row: choosing it opens the conversation at that message.
    """
    if not tokens:
        return []
    s, c = SearchEntry, Conversation
    conversation, message, entry_id = column(s, "conversation"), column(s, "message"), column(s, "id")
    m, t = Message, Turn
    # Of an active conversation, and a message only on its shown branch of versions.
    active = (
        f"JOIN {table(c)} c ON c.{column(c, 'id')} = e.{conversation} AND c.{column(c, 'state')} = %s"  # noqa: S608
        f" AND (e.{message} IS NULL OR EXISTS (SELECT 1 FROM {table(m)} sm JOIN {table(t)} st"
        f" ON st.{column(t, 'id')} = sm.{column(m, 'turn')} WHERE sm.{column(m, 'id')} = e.{message}"
        f" AND st.{column(t, 'shown')}))"
    )
    connection = transaction.get_connection()
    if connection.vendor == "sqlite":
        search = f'"{SQLITE_SEARCH_TABLE}"'
        match = " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)
        sql = (
            f"WITH m AS (SELECT rowid, rank FROM {search} WHERE {search} MATCH %s),"  # noqa: S608
            f" hits AS (SELECT e.{conversation} AS conversation, e.{message} AS message, e.rowid AS entry,"
            f" m.rank AS rank, e.{entry_id} AS id,"
            f" ROW_NUMBER() OVER (PARTITION BY e.{conversation} ORDER BY m.rank, e.{message} IS NULL, e.{entry_id})"
            " AS n,"
            f" COUNT(*) OVER (PARTITION BY e.{conversation}) AS matches"
            f" FROM m JOIN {table(s)} e ON e.rowid = m.rowid {active}),"
            f" best AS (SELECT * FROM hits WHERE n = 1 ORDER BY rank, id LIMIT %s)"
            f" SELECT best.conversation, best.message,"
            f" snippet({search}, 1, '{MARK_START}', '{MARK_END}', '…', 24), best.matches"
            f" FROM best JOIN {search} ON {search}.rowid = best.entry WHERE {search} MATCH %s"
            f" ORDER BY best.rank, best.id"
        )
        params: list[Any] = [match, ConversationState.ACTIVE.value, limit, match]
    elif connection.vendor == "postgresql":
        vector = f'e."{POSTGRESQL_SEARCH_COLUMN}"'
        either = " || ".join(["plainto_tsquery('english', %s)"] * len(tokens))
        options = (
            f'StartSel="{MARK_START}",StopSel="{MARK_END}",MaxWords=24,MinWords=8,MaxFragments=1,'
            'FragmentDelimiter=" … "'
        )
        sql = (
            f"WITH terms AS MATERIALIZED (SELECT {either} AS q), hits AS ("  # noqa: S608
            f"SELECT e.{conversation} AS conversation, e.{message} AS message, e.{column(s, 'text')} AS text,"
            f" ts_rank({vector}, terms.q) AS rank, e.{entry_id} AS id,"
            f" ROW_NUMBER() OVER (PARTITION BY e.{conversation} ORDER BY ts_rank({vector}, terms.q) DESC,"
            f" e.{message} IS NULL, e.{entry_id}) AS n, COUNT(*) OVER (PARTITION BY e.{conversation}) AS matches"
            f" FROM terms, {table(s)} e {active} WHERE {vector} @@ terms.q),"
            f" best AS (SELECT * FROM hits WHERE n = 1 ORDER BY rank DESC, id LIMIT %s)"
            f" SELECT conversation, message, ts_headline('english', text, terms.q, %s), matches FROM best, terms"
            f" ORDER BY rank DESC, id"
        )
        params = [*tokens, ConversationState.ACTIVE.value, limit, options]
    else:
        raise NotImplementedError(f"conversation search on {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        SearchHit(from_db(s, "conversation", row[0]), from_db(s, "message", row[1]), " ".join(row[2].split()), row[3])
        for row in rows
    ]
