"""Text rules shared by every limit in the contract, counted the way browsers count."""

from __future__ import annotations

import unicodedata


def utf16_length(text: str) -> int:
    """Return the length in UTF-16 code units (an emoji outside the BMP counts 2)."""
    return len(text.encode("utf-16-le")) // 2


def has_control_characters(text: str, *, allow: str = "") -> bool:
    """Return whether text holds a control character (Unicode category Cc) not in allow."""
    return any(unicodedata.category(ch) == "Cc" and ch not in allow for ch in text)
