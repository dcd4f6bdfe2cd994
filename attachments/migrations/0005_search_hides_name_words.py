"""Search entries index a file's name with its words between private-use characters, not in brackets.

The words (`report.pdf` as `report pdf`, so PostgreSQL finds `report`) were written as
`report.pdf (report pdf)`, which snippets showed; they are now written between the
characters `conversations.search` hides from snippets. Entries written before are rewritten
here (only those of messages with such files). It lives with attachments because the
words are there for file names; the structures are the conversations app's.
"""

import re

from django.db import migrations

HIDDEN_START, HIDDEN_END = "\ue002", "\ue003"  # conversations.search


def _forms(parts):
    """Each multi-word file name of a message: its written form before and after."""
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict) or part.get("type") != "attachment":
            continue
        name = str(part.get("name", ""))
        words = " ".join(re.findall(r"\w+", name))
        if " " in words:
            yield f"{name} ({words})", f"{name} {HIDDEN_START} {words} {HIDDEN_END}"


def _rewrite(apps, *, forward):
    entry_model = apps.get_model("conversations", "SearchEntry")
    written = " (" if forward else HIDDEN_START
    entries = entry_model.objects.filter(message__isnull=False, text__contains=written).select_related("message")
    for entry in entries.only("id", "text", "message__parts").iterator():
        text = entry.text
        for before, after in _forms(entry.message.parts):
            text = text.replace(before, after) if forward else text.replace(after, before)
        if text != entry.text:
            entry_model.objects.filter(id=entry.id).update(text=text)


class Migration(migrations.Migration):
    dependencies = [
        ("attachments", "0004_unsent_without_conversation"),
        ("conversations", "0014_conversation_untrusted_read_at"),
    ]

    operations = [
        migrations.RunPython(
            lambda apps, schema_editor: _rewrite(apps, forward=True),
            lambda apps, schema_editor: _rewrite(apps, forward=False),
        ),
    ]
