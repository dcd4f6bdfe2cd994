"""Text rules shared by every limit in the contract, counted the way browsers count."""

from __future__ import annotations

import re
import unicodedata
from typing import TypeVar, cast

T = TypeVar("T")

# A str holds a code point of this range only as a lone surrogate: JSON's `\ud83d\ude00`
# pairs are joined into one code point when parsed. No UTF-8 (so no database) takes one.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

# Characters that change how a text reads without being seen: bidirectional embeddings,
# overrides and isolates (U+202E shows "gpj.exe" as "exe.jpg"), the invisible direction
# marks (LRM, RLM, ALM), and zero-width characters (two names that look the same but
# differ). Names and memory facts refuse them; titles made from message text and the
# Markdown export strip them.
DISGUISING_CHARACTERS = frozenset(
    "\u202a\u202b\u202c\u202d\u202e"  # LRE, RLE, PDF, LRO, RLO
    "\u2066\u2067\u2068\u2069"  # LRI, RLI, FSI, PDI
    "\u200e\u200f\u061c"  # LRM, RLM, ALM
    "\u200b\u200c\u200d\u2060\ufeff\u180e"  # ZWSP, ZWNJ, ZWJ, WJ, BOM/ZWNBSP, MVS
    "\u2061\u2062\u2063\u2064"  # invisible function application, times, separator, plus
)
_ZWJ = "\u200d"
_EMOJI_PRESENTATION = "\ufe0f"


def utf16_length(text: str) -> int:
    """Return the length in UTF-16 code units (an emoji outside the BMP counts 2)."""
    # surrogatepass: a lone surrogate counts 1, as in the browser, instead of raising.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def has_lone_surrogates(text: str) -> bool:
    """Return whether text holds half of a UTF-16 surrogate pair on its own."""
    # An ASCII string (known without reading it) holds none.
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def line_breaks_normalize(text: str) -> str:
    """Return text with every line break as `\n` (`\r\n` and a lone `\r` as well).

    The one rule for line breaks, applied wherever the owner's or the model's text enters
    (messages, facts, task and owner instructions, browser-task replies), before limits are
    counted and control characters checked: a Windows or old-Mac line break is a line break.
    """
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def has_control_characters(text: str, *, allow: str = "") -> bool:
    """Return whether text holds a control character (Unicode category Cc) not in allow."""
    return any(unicodedata.category(ch) == "Cc" and ch not in allow for ch in text)


def _joins_emoji(text: str, index: int) -> bool:
    """Whether the ZWJ at index joins two pictographs (👩‍💻, 🏳️‍🌈), where it is visible as one glyph."""
    if index == 0 or index + 1 >= len(text):
        return False
    before, after = text[index - 1], text[index + 1]
    return (before == _EMOJI_PRESENTATION or unicodedata.category(before) in ("So", "Sk")) and (
        unicodedata.category(after) == "So"
    )


def _disguising_at(text: str, index: int) -> bool:
    ch = text[index]
    return ch in DISGUISING_CHARACTERS and not (ch == _ZWJ and _joins_emoji(text, index))


def has_disguising_characters(text: str) -> bool:
    """Return whether text holds a bidi control or an invisible character (see DISGUISING_CHARACTERS)."""
    return any(_disguising_at(text, i) for i, ch in enumerate(text) if ch in DISGUISING_CHARACTERS)


def strip_disguising_characters(text: str) -> str:
    """Return text without the characters has_disguising_characters refuses."""
    if not any(ch in DISGUISING_CHARACTERS for ch in text):
        return text
    return "".join(ch for i, ch in enumerate(text) if not _disguising_at(text, i))


def ascii_whole_number(raw: str, *, max_digits: int = 18) -> int | None:
    """Return the number written in 1-max_digits ASCII digits, or None for anything else.

    `str.isdigit` also takes "²" and other digits that `int` refuses, and `int` takes
    "٣", "+3" and " 3 "; a query parameter is ASCII digits only.
    """
    if not 1 <= len(raw) <= max_digits or not raw.isascii() or not raw.isdigit():
        return None
    return int(raw)


def json_text_safe(value: T) -> T:
    """Return value with NUL characters and lone surrogates in its strings made U+FFFD.

    PostgreSQL's jsonb refuses NUL, and no UTF-8 column takes a lone surrogate.
    """
    if isinstance(value, str):
        cleaned = value.replace("\x00", "\ufffd")
        if has_lone_surrogates(cleaned):
            cleaned = _LONE_SURROGATE.sub("\ufffd", cleaned)
        return cast(T, cleaned)
    if isinstance(value, dict):
        return cast(T, {json_text_safe(k): json_text_safe(v) for k, v in value.items()})
    if isinstance(value, list):
        return cast(T, [json_text_safe(v) for v in value])
    return value
