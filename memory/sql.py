"""The memory app's hand-written SQL: full-text search on each database.

The search structures are the migration's (`0002_search`): an FTS5 table on SQLite, a
generated `tsvector` column with a GIN index on PostgreSQL. Query tokens come from
`memory.query` (word characters only) and travel only as bound parameters: on SQLite as
one MATCH string in which every token is an FTS5 string (`"token"`) joined by OR, on
PostgreSQL as one `plainto_tsquery` per token joined by `||` (OR). Neither database ever
reads a query word as an operator. Every vendor difference of the app is in this module.
"""

from __future__ import annotations

from typing import TypedDict

from django.db import transaction

from flarebot.core.rows import column, from_db, table
from memory.models import Fact, FactState

# The FTS5 table and the tsvector column the migration made (not model fields).
SQLITE_SEARCH_TABLE = "memory_fact_search"
POSTGRESQL_SEARCH_COLUMN = "search"


class FactMatch(TypedDict):
    id: str
    content: str
    version: int


def fts5_match(tokens: list[str]) -> str:
    """Return an FTS5 query that matches any of the tokens, each quoted as an FTS5 string."""
    return " OR ".join('"' + token.replace('"', '""') + '"' for token in tokens)


def facts_search(*, tokens: list[str], limit: int) -> list[FactMatch]:
    """Return the active facts matching any token, best first (bm25 / ts_rank), at most `limit`."""
    if not tokens:
        return []
    f = Fact
    fid, content, version = column(f, "id"), column(f, "content"), column(f, "version")
    connection = transaction.get_connection()
    if connection.vendor == "sqlite":
        search = f'"{SQLITE_SEARCH_TABLE}"'
        # `rank` is bm25 here; FTS5 sorts by it itself, about twice as fast as an ORDER BY
        # on bm25() called as a function.
        sql = (
            f"SELECT f.{fid}, f.{content}, f.{version} FROM ("  # noqa: S608
            f"SELECT fact_id, rank FROM {search} WHERE {search} MATCH %s ORDER BY rank LIMIT %s) AS s"
            f" JOIN {table(f)} f ON f.{fid} = s.fact_id WHERE f.{column(f, 'state')} = %s ORDER BY s.rank, f.{fid}"
        )
        params: list[object] = [fts5_match(tokens), limit, FactState.ACTIVE.value]
    elif connection.vendor == "postgresql":
        vector = f'f."{POSTGRESQL_SEARCH_COLUMN}"'
        either = " || ".join(["plainto_tsquery('english', %s)"] * len(tokens))
        # MATERIALIZED: the query is built once. Inlined into a prepared statement's generic
        # plan, it was rebuilt for every row it was compared with and ranked against.
        sql = (
            f"WITH terms AS MATERIALIZED (SELECT {either} AS q)"  # noqa: S608
            f" SELECT f.{fid}, f.{content}, f.{version} FROM terms, {table(f)} f"
            f" WHERE f.{column(f, 'state')} = %s AND {vector} @@ terms.q"
            f" ORDER BY ts_rank({vector}, terms.q) DESC, f.{column(f, 'created_at')} DESC, f.{fid} LIMIT %s"
        )
        params = [*tokens, FactState.ACTIVE.value, limit]
    else:
        raise NotImplementedError(f"memory search on {connection.vendor}")
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        {"id": str(from_db(f, "id", row_id)), "content": row_content, "version": row_version}
        for row_id, row_content, row_version in rows
    ]
