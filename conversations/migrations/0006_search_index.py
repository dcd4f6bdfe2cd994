"""Full-text search over conversation names and finished messages, kept by the database.

SQLite: an FTS5 table (Porter stemming over unicode61) filled by triggers on the entries
table, in the same transaction as each write. PostgreSQL: a generated `tsvector` column
(`english`) with a GIN index; not a model field, so the ORM never reads or writes it.
Django's SQLite schema editor rebuilds a table to alter it and drops its triggers with
it: a later migration that alters `conversations_searchentry` must create them again.
The entries of conversations that exist already are made here.
"""

from django.db import migrations

TABLE = "conversations_searchentry"
SQLITE = [
    "CREATE VIRTUAL TABLE conversations_search USING fts5("
    " entry_id UNINDEXED, text, tokenize = 'porter unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER conversations_search_insert AFTER INSERT ON {TABLE} BEGIN"
    " INSERT INTO conversations_search (rowid, entry_id, text) VALUES (new.rowid, new.id, new.text); END",
    f"CREATE TRIGGER conversations_search_update AFTER UPDATE OF text ON {TABLE} BEGIN"
    " DELETE FROM conversations_search WHERE rowid = old.rowid;"
    " INSERT INTO conversations_search (rowid, entry_id, text) VALUES (new.rowid, new.id, new.text); END",
    f"CREATE TRIGGER conversations_search_delete AFTER DELETE ON {TABLE} BEGIN"
    " DELETE FROM conversations_search WHERE rowid = old.rowid; END",
]
SQLITE_REVERSE = [
    "DROP TRIGGER conversations_search_delete",
    "DROP TRIGGER conversations_search_update",
    "DROP TRIGGER conversations_search_insert",
    "DROP TABLE conversations_search",
]
POSTGRESQL = [
    f"ALTER TABLE {TABLE} ADD COLUMN search tsvector"
    " GENERATED ALWAYS AS (to_tsvector('english'::regconfig, text)) STORED",
    # conversations_search: entries matching a query
    f"CREATE INDEX conversations_search ON {TABLE} USING gin (search)",
]
POSTGRESQL_REVERSE = [
    "DROP INDEX conversations_search",
    f"ALTER TABLE {TABLE} DROP COLUMN search",
]


def _statements(schema_editor, sqlite, postgresql):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        return sqlite
    if vendor == "postgresql":
        return postgresql
    raise RuntimeError(f"conversation search is built for SQLite and PostgreSQL, not {vendor}")


def _text(parts):
    return "\n".join(p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text").strip()


def forward(apps, schema_editor):
    for statement in _statements(schema_editor, SQLITE, POSTGRESQL):
        schema_editor.execute(statement)
    conversation_model = apps.get_model("conversations", "Conversation")
    message_model = apps.get_model("conversations", "Message")
    entry_model = apps.get_model("conversations", "SearchEntry")
    entries = [
        entry_model(conversation_id=c.id, message=None, text=c.name)
        for c in conversation_model.objects.filter(state="active").only("id", "name")
    ]
    for message in message_model.objects.filter(turn__status__in=("completed", "failed", "cancelled")).iterator():
        text = _text(message.parts)
        if text:
            entries.append(entry_model(conversation_id=message.conversation_id, message_id=message.id, text=text))
    entry_model.objects.bulk_create(entries, batch_size=500)


def reverse(apps, schema_editor):
    for statement in _statements(schema_editor, SQLITE_REVERSE, POSTGRESQL_REVERSE):
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [("conversations", "0005_search_entries")]

    operations = [migrations.RunPython(forward, reverse)]
