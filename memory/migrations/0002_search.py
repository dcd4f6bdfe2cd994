"""Full-text search over active facts, kept in step with every write by the database itself.

SQLite: an FTS5 table (Porter stemming over the unicode61 tokenizer) filled by triggers on
`memory_fact`, so each write updates it in the same statement's transaction; tombstones
are never in it. Django's SQLite schema editor rebuilds a table to alter it and drops its
triggers with it: a later migration that alters `memory_fact` must create them again.

PostgreSQL: a generated `tsvector` column (`english` configuration) with a GIN index; the
column is not a model field, so the ORM never reads or writes it.
"""

from django.db import migrations

SQLITE = [
    "CREATE VIRTUAL TABLE memory_fact_search USING fts5("
    " fact_id UNINDEXED, content, tokenize = 'porter unicode61 remove_diacritics 2')",
    # Deleting by fact_id scans the table: it holds only active facts (at most 200).
    "CREATE TRIGGER memory_fact_search_insert AFTER INSERT ON memory_fact WHEN new.state = 'active' BEGIN"
    " INSERT INTO memory_fact_search (fact_id, content) VALUES (new.id, new.content); END",
    "CREATE TRIGGER memory_fact_search_update AFTER UPDATE OF content, state ON memory_fact BEGIN"
    " DELETE FROM memory_fact_search WHERE fact_id = old.id;"
    " INSERT INTO memory_fact_search (fact_id, content) SELECT new.id, new.content WHERE new.state = 'active'; END",
    "CREATE TRIGGER memory_fact_search_delete AFTER DELETE ON memory_fact BEGIN"
    " DELETE FROM memory_fact_search WHERE fact_id = old.id; END",
    "INSERT INTO memory_fact_search (fact_id, content) SELECT id, content FROM memory_fact WHERE state = 'active'",
]
SQLITE_REVERSE = [
    "DROP TRIGGER memory_fact_search_delete",
    "DROP TRIGGER memory_fact_search_update",
    "DROP TRIGGER memory_fact_search_insert",
    "DROP TABLE memory_fact_search",
]
POSTGRESQL = [
    "ALTER TABLE memory_fact ADD COLUMN search tsvector"
    " GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED",
    # facts_search: active facts matching a query (tombstones have no lexemes)
    "CREATE INDEX memory_fact_search ON memory_fact USING gin (search)",
]
POSTGRESQL_REVERSE = [
    "DROP INDEX memory_fact_search",
    "ALTER TABLE memory_fact DROP COLUMN search",
]


def _statements(schema_editor, sqlite, postgresql):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        return sqlite
    if vendor == "postgresql":
        return postgresql
    raise RuntimeError(f"memory search is built for SQLite and PostgreSQL, not {vendor}")


def forward(apps, schema_editor):
    for statement in _statements(schema_editor, SQLITE, POSTGRESQL):
        schema_editor.execute(statement)


def reverse(apps, schema_editor):
    for statement in _statements(schema_editor, SQLITE_REVERSE, POSTGRESQL_REVERSE):
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_facts")]

    operations = [migrations.RunPython(forward, reverse)]
