"""Searching conversations: their names and the text of their finished messages.

The query rules are memory search's (`memory.query`): at most 1,000 UTF-16 code units,
Unicode word tokens with English stop words dropped, at most 24, OR-combined, never read
as query syntax; at most 50 results, best first, each with a plain-text snippet. What is
searchable is written when a turn ends (its messages) and when a conversation is named,
so an answer is never re-indexed while it streams. A conversation is one result: its best
matching entry, with the matched words marked, and how many of its entries matched. A
message's entry holds its text and the names of its attachments (a file's name finds the
message it came with, user's or answer's), so the ranking and ties are those of any entry.
A name of several words is indexed with its words too, between private-use characters that
snippets drop: a snippet shows the name as given, with a word matched among them marked in
the name.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, TypedDict

from conversations import sql
from conversations.models import Conversation, Message
from conversations.selectors import conversations_unread
from conversations.serializers import conversation_json
from flarebot.core.errors import InvalidInput
from flarebot.core.text import utf16_length
from memory.query import QUERY_MAX, query_tokens

RESULTS_MAX = 50


class SearchResult(TypedDict):
    conversation: dict[str, Any]
    message_id: str | None
    snippet: str
    # Additions: the matched words' places in the snippet ([start, end) in UTF-16 code units,
    # as a browser's string indexes), and how many entries of the conversation matched.
    highlights: list[list[int]]
    matches: int


def message_text(parts: list[dict[str, Any]]) -> str:
    """The searchable text of a message: its text parts, then its attachments' names (tool calls are not searched)."""
    texts = [_unmarked(str(p.get("text", ""))) for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    names = [
        _name_text(_unmarked(str(p.get("name", ""))))
        for p in parts
        if isinstance(p, dict) and p.get("type") == "attachment"
    ]
    return "\n".join(text for text in [*texts, *names] if text)


# Where the words a file's name is indexed with begin and end (private-use characters,
# removed from indexed text like the marks); snippets never show what lies between them.
HIDDEN_START, HIDDEN_END = "\ue002", "\ue003"
_INTERNAL = str.maketrans("", "", sql.MARK_START + sql.MARK_END + HIDDEN_START + HIDDEN_END)


def _name_text(name: str) -> str:
    """A file's name as indexed: the name, then its words (hidden from snippets) when it has several.

    PostgreSQL's parser reads `report.pdf` as one file token, so `report` alone would not
    find it; its words, listed after it, are found on both databases.
    """
    words = re.findall(r"\w+", name)
    return f"{name} {HIDDEN_START} {' '.join(words)} {HIDDEN_END}" if len(words) > 1 else name


def _unmarked(text: str) -> str:
    """Text to index, without the characters that mark matches in snippets or hide a name's words."""
    return text.translate(_INTERNAL).strip()


def snippet_shown(marked: str) -> str:
    """Drop the hidden words of file names from a marked snippet; a word matched there is marked in the name.

    The snippet may begin or end inside hidden words (the database cut it there): what lies
    before an end without its start, or after a start without its end, is hidden too.
    """
    pieces = re.split(f"([{HIDDEN_START}{HIDDEN_END}])", marked)
    delimiters = [p for p in pieces if p in (HIDDEN_START, HIDDEN_END)]
    hidden = bool(delimiters) and delimiters[0] == HIDDEN_END
    shown: list[str] = []
    for piece in pieces:
        if piece in (HIDDEN_START, HIDDEN_END):
            hidden = piece == HIDDEN_START
        elif not hidden:
            shown.append(piece)
        elif shown:
            matched = re.findall(f"{sql.MARK_START}(.*?){sql.MARK_END}", piece)
            shown[-1] = _marked_words(shown[-1], {word.casefold() for word in matched})
    cut_at_start = marked.startswith("…") and not (shown and shown[0].startswith("…"))
    cut_at_end = marked.endswith("…") and not (shown and shown[-1].endswith("…"))
    text = " ".join("".join(shown).split())
    return ("…" if cut_at_start else "") + text + ("…" if cut_at_end else "")


def _marked_words(text: str, words: set[str]) -> str:
    """Mark, outside the marks already there, each word of `text` that is one of `words`."""
    if not words:
        return text
    pieces = re.split(f"({sql.MARK_START}.*?{sql.MARK_END})", text)
    for index, piece in enumerate(pieces):
        if not piece.startswith(sql.MARK_START):
            pieces[index] = re.sub(
                r"\w+",
                lambda word: f"{sql.MARK_START}{word[0]}{sql.MARK_END}" if word[0].casefold() in words else word[0],
                piece,
            )
    return "".join(pieces)


def snippet_marks(marked: str) -> tuple[str, list[list[int]]]:
    """Split a marked snippet into its plain text and the UTF-16 ranges of its matched words."""
    plain: list[str] = []
    highlights: list[list[int]] = []
    position, start = 0, None
    for ch in marked:
        if ch == sql.MARK_START:
            start = position
        elif ch == sql.MARK_END:
            if start is not None and position > start:
                highlights.append([start, position])
            start = None
        else:
            plain.append(ch)
            position += 2 if ord(ch) > 0xFFFF else 1
    return "".join(plain), highlights


def search_index_turn(*, turn_id: uuid.UUID, conversation_id: uuid.UUID) -> None:
    """Make a finished turn's messages and its conversation's name searchable (inside the caller's transaction)."""
    texts = [
        (m_id, message_text(parts))
        for m_id, parts in Message.objects.filter(turn_id=turn_id).values_list("id", "parts")
    ]
    name = Conversation.objects.filter(id=conversation_id).values_list("name", flat=True).first()
    entries: list[tuple[uuid.UUID | None, str]] = [(m_id, text) for m_id, text in texts if text]
    if name is not None:
        entries.append((None, _unmarked(name)))
    sql.search_entries_upsert(conversation_id=conversation_id, entries=entries)


def search_index_name(*, conversation_id: uuid.UUID, name: str) -> None:
    """Make a conversation's (new) name searchable."""
    sql.search_entries_upsert(conversation_id=conversation_id, entries=[(None, _unmarked(name))])


def conversations_search(*, query: str) -> list[SearchResult]:
    """Return the best matches of a query among active conversations, at most 50."""
    if not 1 <= utf16_length(query) <= QUERY_MAX or not query.strip():
        raise InvalidInput(f"q: must be 1-{QUERY_MAX} characters and not blank.", code="invalid_query")
    hits = sql.search_entries_match(tokens=query_tokens(query), limit=RESULTS_MAX)
    found = conversations_unread(Conversation.objects.filter(id__in={hit.conversation_id for hit in hits}))
    conversations = {c.id: c for c in found}
    results = []
    for hit in hits:
        if hit.conversation_id not in conversations:
            continue
        snippet, highlights = snippet_marks(snippet_shown(hit.snippet))
        results.append(
            SearchResult(
                conversation=conversation_json(conversations[hit.conversation_id]),
                message_id=str(hit.message_id) if hit.message_id else None,
                snippet=snippet,
                highlights=highlights,
                matches=hit.matches,
            )
        )
    return results
