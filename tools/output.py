"""The bound on what one tool call hands back: at most a tool's `output_limit` of JSON.

Size is measured as compact UTF-8 JSON (`json_size`), the form the transcript stores and
the providers receive. Longer output keeps its shape where it can: the longest strings
are cut first, and an object gains `"truncated": true`; anything else is replaced by
`{"truncated": true, "output": <the start of its JSON>}`.
"""

from __future__ import annotations

import json
from typing import Any

TRUNCATED_MARK = "…"
_MAX_ROUNDS = 64


def json_size(value: Any) -> int:
    """Return the size of a value as compact UTF-8 JSON."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))


def output_bound(output: Any, *, limit: int) -> Any:
    """Return output unchanged if it fits `limit`, else a cut copy marked `truncated: true`."""
    size = json_size(output)
    if size <= limit:
        return output
    if isinstance(output, dict):
        marked = {**output, "truncated": True}
        for _ in range(_MAX_ROUNDS):
            excess = json_size(marked) - limit
            if excess <= 0:
                return marked
            if not _cut_longest_string(marked, excess):
                break
    return _prefix_of(output, limit)


def _cut_longest_string(value: dict[str, Any], excess: int) -> bool:
    """Shorten the longest string in value (in place) by at least `excess` bytes; False if none can be."""
    holder, key, text = _longest_string(value)
    if holder is None or len(text) <= 1:
        return False
    encoded = json_size(text) - 2  # without its quotes
    keep = max(0, encoded - excess - len(TRUNCATED_MARK.encode()) - 8)
    cut = _cut_to_bytes(text, keep)
    if len(cut) >= len(text) - 1:
        cut = text[: max(0, len(text) // 2)]
    holder[key] = cut + TRUNCATED_MARK
    return True


def _longest_string(value: Any) -> tuple[Any, Any, str]:
    best: tuple[Any, Any, str] = (None, None, "")
    stack: list[Any] = [value]
    while stack:
        container = stack.pop()
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, item in items:
            if isinstance(item, str) and len(item) > len(best[2]):
                best = (container, key, item)
            elif isinstance(item, dict | list):
                # Copy on the way down: the caller's output must not change.
                copy = dict(item) if isinstance(item, dict) else list(item)
                container[key] = copy
                stack.append(copy)
    return best


def _cut_to_bytes(text: str, budget: int) -> str:
    """The longest prefix of text whose JSON-escaped form fits `budget` bytes."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if json_size(text[:middle]) - 2 <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def _prefix_of(output: Any, limit: int) -> dict[str, Any]:
    text = json.dumps(output, ensure_ascii=False, separators=(",", ":"))
    envelope_size = json_size({"truncated": True, "output": ""})
    return {"truncated": True, "output": _cut_to_bytes(text, limit - envelope_size)}
