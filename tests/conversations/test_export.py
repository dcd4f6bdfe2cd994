"""Export of a conversation: a download of all of it, as Markdown or JSON, and nothing secret."""

from __future__ import annotations

import json
import uuid
from urllib.parse import unquote

import pytest

from conversations.model_settings import provider_key_set
from conversations.models import Message, MessageRole
from conversations.services import conversation_create
from conversations.turns import turn_submit

pytestmark = pytest.mark.django_db

KEY = "sk-ant-api03-Qw7eRt9yUi1oPa3sDf5gHj7k"


def url(conversation_id, fmt: str | None) -> str:
    return f"/api/conversations/{conversation_id}/export/" + (f"?format={fmt}" if fmt else "")


@pytest.fixture
def conversation(owner):
    provider_key_set(provider="anthropic", key=KEY)
    conversation = conversation_create(name="Kitchen plan: budget/timeline ✓")
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="What does a sink cost?")
    parts = [
        {"type": "text", "text": "Let me look.", "step": 0},
        {
            "type": "tool",
            "tool_call_id": "c1",
            "name": "web_search",
            "input": {"query": "sink price"},
            "output": {"ok": True, "sources": [{"title": "Sinks", "final_url": "https://shop.example/sinks"}]},
            "status": "succeeded",
            "step": 0,
        },
        {"type": "text", "text": "About **200 €**.", "step": 1},
    ]
    Message.objects.create(
        conversation=conversation, turn=turn, role=MessageRole.ASSISTANT, ordinal=2 * turn.ordinal + 1, parts=parts
    )
    return conversation


def test_it_downloads_the_whole_conversation_as_markdown(owner_client, conversation):
    response = owner_client.get(url(conversation.id, "md"))

    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    disposition = response["Content-Disposition"]
    assert disposition.startswith('attachment; filename="Kitchen plan_ budget_timeline _.md"')
    assert unquote(disposition.split("filename*=UTF-8''")[1]) == "Kitchen plan_ budget_timeline ✓.md"
    text = response.content.decode()
    assert text.startswith("# Kitchen plan: budget/timeline ✓\n")
    assert "What does a sink cost?" in text
    assert "About **200 €**." in text
    assert '"query": "sink price"' in text  # the tool call, with its input and output
    assert "- [Sinks](<https://shop.example/sinks>)" in text
    assert KEY not in text


def test_it_downloads_the_conversation_as_json_the_api_would_show(owner_client, conversation):
    response = owner_client.get(url(conversation.id, "json"))

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"].startswith('attachment; filename="Kitchen plan_ budget_timeline _.json"')
    document = json.loads(response.content)
    assert document["conversation"]["id"] == str(conversation.id)
    shown = owner_client.get(f"/api/conversations/{conversation.id}/messages/").json()["messages"]
    # Versions are how the page switches branches; the export is the shown branch alone. Each
    # message lists its attachments (none here).
    assert document["messages"] == [
        {**{k: v for k, v in m.items() if k != "versions"}, "attachments": []} for m in shown
    ]
    assert KEY not in response.content.decode()


def test_it_takes_markdown_by_default_and_refuses_other_formats(owner_client, conversation):
    assert owner_client.get(url(conversation.id, None))["Content-Type"].startswith("text/markdown")
    response = owner_client.get(url(conversation.id, "pdf"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_format"


def test_it_exports_a_conversation_of_a_thousand_messages_whole(owner_client, owner):
    conversation = conversation_create(name="Long")
    for i in range(500):
        turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text=f"Question {i}")
        Message.objects.create(
            conversation=conversation,
            turn=turn,
            role=MessageRole.ASSISTANT,
            ordinal=2 * turn.ordinal + 1,
            parts=[{"type": "text", "text": f"Answer {i}"}],
        )

    document = json.loads(owner_client.get(url(conversation.id, "json")).content)

    assert len(document["messages"]) == 1000
    assert document["messages"][-1]["parts"][0]["text"] == "Answer 499"


def test_it_answers_404_for_an_unknown_or_deleted_conversation_and_keeps_it_private(
    owner_client, anonymous_client, conversation
):
    assert owner_client.get(url(uuid.uuid4(), "md")).status_code == 404
    assert anonymous_client.get(url(conversation.id, "md")).status_code == 401


def test_it_writes_names_titles_urls_and_tool_names_from_the_web_as_literal_text(owner_client, owner):
    conversation = conversation_create(name="Plan [x](javascript:alert(1)) <img src=x onerror=alert(1)> #")
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Read these.")
    sources = [
        {"title": "x](javascript:alert(1)) [y", "final_url": "https://shop.example/a b)<c>\\d"},
        {"title": "![pic](https://evil.example/p.png)", "final_url": "javascript:alert(1)"},
        {"title": "", "final_url": "data:text/html,<script>alert(1)</script>"},
        {"title": "- a list\nof its own &amp; *more*", "final_url": " https://leading-space.example/"},
        {"title": "1. First", "final_url": "HTTPS://shop.example/ü?q=1&r=(2)"},
    ]
    parts = [
        {
            "type": "tool",
            "tool_call_id": "c1",
            "name": "web`search](javascript:x)",
            "input": {"query": "q"},
            "output": {"ok": True, "sources": sources},
            "status": "succeeded",
        }
    ]
    Message.objects.create(
        conversation=conversation, turn=turn, role=MessageRole.ASSISTANT, ordinal=2 * turn.ordinal + 1, parts=parts
    )

    lines = owner_client.get(url(conversation.id, "md")).content.decode().splitlines()

    assert lines[0] == r"# Plan \[x\](javascript:alert(1)) \<img src=x onerror=alert(1)\> \#"
    assert r"Tool call web\`search\](javascript:x) (succeeded):" in lines
    assert lines[lines.index("Sources:") + 1 :] == [
        "",
        r"- [x\](javascript:alert(1)) \[y](<https://shop.example/a%20b)%3Cc%3E%5Cd>)",
        r"- !\[pic\](https://evil.example/p.png)",
        r"- data:text/html,\<script\>alert(1)\</script\>",
        r"- \- a list of its own \&amp; \*more\*",
        r"- [1\. First](<HTTPS://shop.example/%C3%BC?q=1&r=(2)>)",
    ]
