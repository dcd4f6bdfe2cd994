"""Text rules shared by every limit in the contract, counted the way browsers count."""

from __future__ import annotations

import unicodedata
from typing import TypeVar, cast

T = TypeVar("T")


def utf16_length(text: str) -> int:
    """Return the length in UTF-16 code units (an emoji outside the BMP counts 2)."""
    return len(text.encode("utf-16-le")) // 2


def has_control_characters(text: str, *, allow: str = "") -> bool:
    """Return whether text holds a control character (Unicode category Cc) not in allow."""
    return any(unicodedata.category(ch) == "Cc" and ch not in allow for ch in text)


def json_text_safe(value: T) -> T:
    """Return value with NUL characters in its strings made U+FFFD (PostgreSQL's jsonb refuses NUL)."""
    if isinstance(value, str):
        return cast(T, value.replace("\x00", "\ufffd"))
    if isinstance(value, dict):
        return cast(T, {json_text_safe(k): json_text_safe(v) for k, v in value.items()})
    if isinstance(value, list):
        return cast(T, [json_text_safe(v) for v in value])
    return value
