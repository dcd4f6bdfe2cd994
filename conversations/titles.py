"""How a conversation is named when the owner has not named it: after its first message.

The rule lives here alone; the submit statements (`conversations.sql`) store the title with the
first turn, and pages only show what the server stored.
"""

from __future__ import annotations

import re
import unicodedata

DEFAULT_NAME = "New conversation"
# A title fits one sidebar row and stays well inside the name limit (120 units).
TITLE_MAX_UTF16 = 60
ELLIPSIS = "…"
# Left at the end of a cut title before the ellipsis is added.
_TRAILING = " ,;:-–—"  # noqa: RUF001  (the dashes are meant)
# Characters a title never carries: format characters (bidi embeddings, overrides and
# isolates, zero-width spaces and joiners, the BOM) and lone surrogates. Names with them
# are refused, so a title must not have them either.
_DROPPED_CATEGORIES = frozenset({"Cf", "Cs"})
# A title reads only the start of a message: markup can take room, but not this much.
_MARKDOWN_READ = 4_000
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LINE_MARK = re.compile(r"^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+|\d{1,9}[.)]\s+)+")
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]]*)\]\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
_REFERENCE_LINK = re.compile(r"!?\[([^\]]+)\]\[[^\]]*\]")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^<>\s]+)>")
# Emphasis marks at a word's edge (as Markdown reads them), strikethrough and code ticks;
# an underscore inside snake_case or a lone "*" between spaces stays.
_EMPHASIS = re.compile(r"(?<![\w*_])[*_]{1,3}(?=[^\s*_])|(?<=[^\s*_])[*_]{1,3}(?![\w*_])|~~|`+")


def conversation_title_from_text(text: str) -> str:
    """Return the title a first message gives its conversation: one line of at most 60 units.

    Whitespace and control characters become single spaces; invisible format characters
    are dropped. A longer text is cut at the last word boundary that leaves room for the
    ellipsis (hard, inside the word, when that would keep less than half of it: one long
    word, a long link) and ends in "…". A text with nothing visible gives the default name.
    """
    kept, more = _visible_start(markdown_plain(text[:_MARKDOWN_READ]), budget=TITLE_MAX_UTF16)
    if not more:
        return "".join(kept) or DEFAULT_NAME
    room = TITLE_MAX_UTF16 - len(ELLIPSIS)
    count, used = 0, 0
    while count < len(kept) and used + _units(kept[count]) <= room:
        used += _units(kept[count])
        count += 1
    if count < len(kept) and kept[count] != " ":
        # The cut falls inside a word: go back to the space before it, if that keeps enough.
        space = "".join(kept[:count]).rfind(" ")
        if space >= 0 and _units_of(kept[:space]) >= room // 2:
            count = space
    head = "".join(kept[:count])
    return (head.rstrip(_TRAILING) or head) + ELLIPSIS


def markdown_plain(text: str) -> str:
    """The words of Markdown as a person reads them: no fences, heading or list marks, table
    pipes and rules, link targets or emphasis marks (a title from a pasted table or answer)."""
    lines = []
    for line in text.splitlines():
        if _FENCE.match(line) or _TABLE_RULE.match(line):
            continue
        line = _LINE_MARK.sub("", line)
        line = _IMAGE_OR_LINK.sub(r"\1", line)
        line = _REFERENCE_LINK.sub(r"\1", line)
        line = _AUTOLINK.sub(r"\1", line)
        line = _EMPHASIS.sub("", line)
        if "|" in line:
            line = " ".join(cell.strip() for cell in line.strip().strip("|").split("|"))
        lines.append(line)
    return "\n".join(lines)


def _visible_start(text: str, *, budget: int) -> tuple[list[str], bool]:
    """The start of the text as a title sees it, until it exceeds `budget` UTF-16 units.

    Returns its characters and whether the text goes on past `budget`. Only that start
    is read: a message may be 32,000 characters long, and every submit computes a title.
    """
    kept: list[str] = []
    units = 0
    space = False
    for ch in text:
        if ch.isspace() or unicodedata.category(ch) == "Cc":
            space = bool(kept)
            continue
        if unicodedata.category(ch) in _DROPPED_CATEGORIES:
            continue
        if space:
            kept.append(" ")
            units += 1
            space = False
        kept.append(ch)
        units += _units(ch)
        if units > budget:
            return kept, True
    return kept, False


def _units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _units_of(chars: list[str]) -> int:
    return sum(_units(ch) for ch in chars)
