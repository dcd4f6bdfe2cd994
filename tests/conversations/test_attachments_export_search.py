"""Attachments in a conversation's exports and in search, on both databases.

The JSON export lists each message's files (with their hash), the Markdown export links
each one where the server serves it, and search finds a message by a file's name, whether
the owner sent the file or the answer brought it back.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from conversations.models import Message, MessageRole, SearchEntry, Turn
from conversations.services import conversation_create
from tests.attachments.support import png, upload
from tests.conversations.test_search import finished_turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


def export(client, conversation_id, fmt: str):
    response = client.get(f"/api/conversations/{conversation_id}/export/?format={fmt}")
    assert response.status_code == 200, response.content
    return response


def finished_turn_with_files(client, conversation, text: str, files: dict[str, bytes], answer_parts=None) -> Turn:
    """A turn whose message carries these files, ended with an answer (its parts as given)."""
    ids = [upload(client, conversation.id, name, content).json()["id"] for name, content in files.items()]
    return finished_turn(conversation, text, "Got it.", attachments=ids, answer_parts=answer_parts)


def test_the_json_export_lists_each_message_attachments_with_their_hash(owner_client):
    conversation = conversation_create(name="Files")
    notes = b"# Notes\n"
    finished_turn_with_files(owner_client, conversation, "", {"shot.png": png(), "notes.md": notes})

    document = json.loads(export(owner_client, conversation.id, "json").content)

    question, answer = document["messages"]
    assert [(a["name"], a["media_type"], a["size"], a["sha256"]) for a in question["attachments"]] == [
        ("shot.png", "image/png", len(png()), hashlib.sha256(png()).hexdigest()),
        ("notes.md", "text/markdown", len(notes), hashlib.sha256(notes).hexdigest()),
    ]
    ids = [p["id"] for p in question["parts"] if p["type"] == "attachment"]
    assert [a["id"] for a in question["attachments"]] == ids
    assert answer["attachments"] == []


def test_the_markdown_export_links_each_attachment_with_its_name_escaped(owner_client):
    conversation = conversation_create(name="Files")
    turn = finished_turn_with_files(owner_client, conversation, "Look", {"[x](javascript:alert(1))*.png": png()})
    [part] = [p for p in Message.objects.get(turn=turn, role=MessageRole.USER).parts if p["type"] == "attachment"]

    text = export(owner_client, conversation.id, "md").content.decode()

    link = f"- [\\[x\\](javascript:alert(1))\\*.png](http://testserver/api/attachments/{part['id']}/)"
    assert link in text.splitlines()
    assert "Attachments:" in text


def test_an_answer_attachment_is_exported_too(owner_client):
    conversation = conversation_create(name="Files")
    out = upload(owner_client, conversation.id, "report.csv", b"a,b\n1,2\n").json()
    answer_part = {k: out[k] for k in ("id", "name", "media_type", "size")} | {"type": "attachment"}
    finished_turn_with_files(
        owner_client, conversation, "", {"in.txt": b"hello\n"}, [{"type": "text", "text": "Done."}, answer_part]
    )

    document = json.loads(export(owner_client, conversation.id, "json").content)
    text = export(owner_client, conversation.id, "md").content.decode()

    assert document["messages"][1]["attachments"] == [
        {k: out[k] for k in ("id", "name", "media_type", "size", "sha256")}
    ]
    assert f"- [report.csv](http://testserver/api/attachments/{out['id']}/)" in text


def test_search_finds_a_message_by_an_attachment_name(owner_client):
    files = conversation_create(name="Receipts")
    other = conversation_create(name="Garden")
    turn = finished_turn_with_files(owner_client, files, "", {"invoice-march.pdf.txt": b"total 12\n"})
    finished_turn_with_files(owner_client, other, "Which tomatoes grow in shade?", {})
    question = Message.objects.get(turn=turn, role=MessageRole.USER)

    response = owner_client.get("/api/conversations/", {"q": "invoice"})

    assert response.status_code == 200, response.content
    [hit] = response.json()["results"]
    assert (hit["conversation"]["id"], hit["message_id"]) == (str(files.id), str(question.id))
    assert hit["snippet"] == "invoice-march.pdf.txt"
    assert [hit["snippet"][start:end] for start, end in hit["highlights"]] == ["invoice"]


def test_a_snippet_shows_a_files_name_as_given_never_the_words_it_is_indexed_with(owner_client):
    conversation = conversation_create(name="Pictures")
    finished_turn_with_files(owner_client, conversation, "Look at this", {"gradient.png": png()})

    [hit] = owner_client.get("/api/conversations/", {"q": "gradient"}).json()["results"]

    assert hit["snippet"] == "Look at this gradient.png"
    assert [hit["snippet"][start:end] for start, end in hit["highlights"]] == ["gradient"]


def test_entries_written_before_are_rewritten_to_hide_a_names_words(owner_client):
    conversation = conversation_create(name="Pictures")
    turn = finished_turn_with_files(owner_client, conversation, "", {"gradient.png": png()})
    entry = SearchEntry.objects.filter(message__turn=turn, message__role=MessageRole.USER)
    entry.update(text="gradient.png (gradient png)")  # as search indexed a file's name before
    executor = MigrationExecutor(connection)
    executor.migrate([("attachments", "0004_unsent_without_conversation")])

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    [hit] = owner_client.get("/api/conversations/", {"q": "gradient"}).json()["results"]
    assert hit["snippet"] == "gradient.png"
    assert [hit["snippet"][start:end] for start, end in hit["highlights"]] == ["gradient"]


def test_search_finds_an_answer_by_the_name_of_a_file_it_returned(owner_client):
    conversation = conversation_create(name="Shell")
    out = upload(owner_client, conversation.id, "histogram.png", png()).json()
    answer_part = {k: out[k] for k in ("id", "name", "media_type", "size")} | {"type": "attachment"}
    turn = finished_turn_with_files(
        owner_client, conversation, "Plot it", {}, [{"type": "text", "text": "Here."}, answer_part]
    )
    answer = Message.objects.get(turn=turn, role=MessageRole.ASSISTANT)

    [hit] = owner_client.get("/api/conversations/", {"q": "histogram"}).json()["results"]

    assert hit["message_id"] == str(answer.id)
    assert hit["matches"] == 1
