"""A conversation as a file the owner keeps: Markdown to read, JSON to process.

Everything the transcript holds goes in (text, tool calls with their input and output,
the sources tools cited); nothing else does: no key, no setting, no event log.

The Markdown file is opened in viewers we do not control, so text that reached us from
the web or the model and that we place inside Markdown syntax (the conversation's name
in the heading, tool names, source titles and attachment names as link text, source URLs
as link targets) goes through `_md_text` (text) or `_md_target` (a link target, http(s) only): it reads
as literal text and cannot close a link, open one, or inject HTML or an image. Message text is the message itself and is
kept as written.

Attachments (a message's `attachment` parts) are listed in the JSON file under each
message's `attachments` (with their `sha256`), and linked in the Markdown file to where the
server serves them (`ORIGIN/api/attachments/ID/`, ORIGIN being the address the export was
asked from).
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.utils import timezone

from attachments.selectors import attachments_by_id
from conversations.models import Conversation, Message, MessageRole
from conversations.selectors import conversation_require_active, shown_messages
from conversations.serializers import conversation_json, message_json
from flarebot.core.errors import InvalidInput
from flarebot.core.text import strip_disguising_characters
from flarebot.core.times import iso

FORMATS = ("md", "json")

# Characters that mean something inline in CommonMark or its common extensions (GFM's
# strikethrough, math), and `#` (a heading's closing sequence): backslash-escaped, each
# one reads as itself.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>#~&$])")
# At the start of a line (a list item's text), these would open a list of their own.
_MD_LIST_MARK = re.compile(r"^(\d+)([.)])|^([-+])")
# Characters a link target keeps as they are: RFC 3986's unreserved and reserved ones, and
# `%` (so existing escapes stay). Anything else (spaces, `<`, `>`, backslashes, quotes,
# non-ASCII) is percent-encoded, so the target stays one target inside `<...>`.
_URL_SAFE = "-._~:/?#[]@!$&'()*+,;=%"
_WEB_URL = re.compile(r"https?://[^/?#\s]", re.IGNORECASE)


@dataclass(frozen=True)
class ExportFile:
    filename: str
    content_type: str
    body: bytes


def conversation_export(*, conversation_id: uuid.UUID, fmt: str, origin: str) -> ExportFile:
    """Return the whole conversation as a file in `fmt` (md or json); `origin` is the server's address, for links."""
    if fmt not in FORMATS:
        raise InvalidInput("format: must be md or json.", code="invalid_format")
    conversation = conversation_require_active(conversation_id=conversation_id)
    messages = list(shown_messages(conversation_id=conversation_id))
    shown = [m for m in messages if m.role != MessageRole.ASSISTANT or m.parts]
    name = _file_name(conversation.name)
    if fmt == "json":
        document = {
            "conversation": conversation_json(conversation),
            "messages": [_message_with_attachments(m, conversation_id) for m in shown],
            "exported_at": iso(timezone.now()),
        }
        body = json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8", "surrogatepass")
        return ExportFile(f"{name}.json", "application/json", body)
    return ExportFile(f"{name}.md", "text/markdown; charset=utf-8", _markdown(conversation, shown, origin).encode())


def _file_name(name: str) -> str:
    """The conversation's name as a file name: path and shell-unsafe marks and invisible characters as `_`."""
    normal = unicodedata.normalize("NFKC", name)
    visible = "".join("_" if unicodedata.category(ch)[0] == "C" else ch for ch in normal)
    kept = re.sub(r'[/\\:*?"<>|]+', "_", visible).strip(" .") or "conversation"
    return kept[:100]


def _md_text(raw: object) -> str:
    """Return untrusted text as Markdown that reads as exactly that text, on one line."""
    text = strip_disguising_characters(str(raw))
    text = " ".join("".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text).split())
    escaped = _MD_SPECIAL.sub(r"\\\1", text)
    return _MD_LIST_MARK.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", escaped)


def _md_target(raw: object) -> str | None:
    """Return an absolute http(s) URL as a `<...>` link target, or None for anything else."""
    url = str(raw or "")
    if not _WEB_URL.match(url):
        return None  # javascript:, data:, relative and scheme-less URLs never become links
    return "<" + quote(url, safe=_URL_SAFE) + ">"


def _md_source(source: dict[str, Any]) -> str:
    """Return a source as a list item: a link to its final URL, or only its title if that is no web URL."""
    url = source.get("final_url")
    label = _md_text(source.get("title") or url or "untitled")
    target = _md_target(url)
    if target is None:
        return f"- {label}"
    return f"- [{label}]({target})"


def _attachment_ids(message: Message) -> list[uuid.UUID]:
    ids = []
    for part in message.parts:
        if isinstance(part, dict) and part.get("type") == "attachment":
            try:
                ids.append(uuid.UUID(str(part.get("id"))))
            except ValueError:
                continue
    return ids


def _message_with_attachments(message: Message, conversation_id: uuid.UUID) -> dict[str, Any]:
    """A message as the API gives it, with its attachments listed: id, name, type, size and hash."""
    ids = _attachment_ids(message)
    rows = attachments_by_id(conversation_id=conversation_id, ids=ids) if ids else {}
    listed = [
        {"id": str(row.id), "name": row.name, "media_type": row.media_type, "size": row.size, "sha256": row.sha256}
        for row in (rows.get(i) for i in ids)
        if row is not None
    ]
    return {**message_json(message), "attachments": listed}


def _md_attachment(part: dict[str, Any], origin: str) -> str:
    """An attachment as a list item linking to where the server serves it."""
    label = _md_text(part.get("name") or "attachment")
    try:
        attachment_id = uuid.UUID(str(part.get("id")))
    except ValueError:
        return f"- {label}"
    return f"- [{label}]({quote(origin.rstrip('/'), safe=_URL_SAFE)}/api/attachments/{attachment_id}/)"


def _markdown(conversation: Conversation, messages: list[Message], origin: str) -> str:
    lines = [f"# {_md_text(conversation.name)}", "", f"Exported from Flarebot on {iso(timezone.now())}.", ""]
    for message in messages:
        who = "You" if message.role == MessageRole.USER else "Flarebot"
        lines += [f"## {who} · {iso(message.created_at)}", ""]
        sources: list[dict[str, Any]] = []
        attached: list[str] = []
        for part in message.parts:
            if part.get("type") == "text":
                lines += [part.get("text", ""), ""]
            elif part.get("type") == "tool":
                lines += _tool_part(part)
                output = part.get("output")
                if isinstance(output, dict):
                    sources += [s for s in output.get("sources", []) if isinstance(s, dict)]
            elif part.get("type") == "attachment":
                attached.append(_md_attachment(part, origin))
        if attached:
            lines += ["Attachments:", "", *attached, ""]
        if sources:
            lines += ["Sources:", ""]
            lines += [_md_source(s) for s in sources]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _tool_part(part: dict[str, Any]) -> list[str]:
    status = part.get("status") or ("succeeded" if part.get("output") is not None else "interrupted")
    fence = "````"  # longer than any fence a JSON string could hold on its own line
    return [
        f"Tool call {_md_text(part.get('name'))} ({_md_text(status)}):",
        "",
        f"{fence}json",
        json.dumps({"input": part.get("input"), "output": part.get("output")}, ensure_ascii=False, indent=2),
        fence,
        "",
    ]
