"""A conversation as a file the owner keeps: Markdown to read, JSON to process.

Everything the transcript holds goes in (text, tool calls with their input and output,
the sources tools cited); nothing else does: no key, no setting, no event log.
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from conversations.models import Conversation, ConversationState, Message, MessageRole
from conversations.serializers import conversation_json, message_json
from flarebot.core.errors import InvalidInput, NotFound
from flarebot.core.times import iso

FORMATS = ("md", "json")


@dataclass(frozen=True)
class ExportFile:
    filename: str
    content_type: str
    body: bytes


def conversation_export(*, conversation_id: uuid.UUID, fmt: str) -> ExportFile:
    """Return the whole conversation as a file in `fmt` (md or json)."""
    if fmt not in FORMATS:
        raise InvalidInput("format: must be md or json.", code="invalid_format")
    conversation = Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE).first()
    if conversation is None:
        raise NotFound("This conversation does not exist.", code="conversation_not_found")
    messages = list(Message.objects.filter(conversation_id=conversation_id).order_by("ordinal"))
    shown = [m for m in messages if m.role != MessageRole.ASSISTANT or m.parts]
    name = _file_name(conversation.name)
    if fmt == "json":
        document = {
            "conversation": conversation_json(conversation),
            "messages": [message_json(m) for m in shown],
            "exported_at": iso(timezone.now()),
        }
        body = json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8", "surrogatepass")
        return ExportFile(f"{name}.json", "application/json", body)
    return ExportFile(f"{name}.md", "text/markdown; charset=utf-8", _markdown(conversation, shown).encode())


def _file_name(name: str) -> str:
    """The conversation's name as a file name: path and shell-unsafe marks and invisible characters as `_`."""
    normal = unicodedata.normalize("NFKC", name)
    visible = "".join("_" if unicodedata.category(ch)[0] == "C" else ch for ch in normal)
    kept = re.sub(r'[/\\:*?"<>|]+', "_", visible).strip(" .") or "conversation"
    return kept[:100]


def _markdown(conversation: Conversation, messages: list[Message]) -> str:
    lines = [f"# {conversation.name}", "", f"Exported from Flarebot on {iso(timezone.now())}.", ""]
    for message in messages:
        who = "You" if message.role == MessageRole.USER else "Flarebot"
        lines += [f"## {who} · {iso(message.created_at)}", ""]
        sources: list[dict[str, Any]] = []
        for part in message.parts:
            if part.get("type") == "text":
                lines += [part.get("text", ""), ""]
            elif part.get("type") == "tool":
                lines += _tool_part(part)
                output = part.get("output")
                if isinstance(output, dict):
                    sources += [s for s in output.get("sources", []) if isinstance(s, dict)]
        if sources:
            lines += ["Sources:", ""]
            lines += [f"- [{s.get('title') or s.get('final_url')}]({s.get('final_url')})" for s in sources]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _tool_part(part: dict[str, Any]) -> list[str]:
    status = part.get("status") or ("succeeded" if part.get("output") is not None else "interrupted")
    fence = "````"  # longer than any fence a JSON string could hold on its own line
    return [
        f"Tool call `{part.get('name')}` ({status}):",
        "",
        f"{fence}json",
        json.dumps({"input": part.get("input"), "output": part.get("output")}, ensure_ascii=False, indent=2),
        fence,
        "",
    ]
