"""The owner's input to a sign-in's live view, checked strictly before it goes anywhere.

Imported by the socket (to refuse bad frames) and by the worker holding the page (which
checks again): a click at page coordinates, a named key, a short text, or a scroll.
"""

from __future__ import annotations

VIEWPORT = {"width": 1280, "height": 900}  # the CSS pixels of every task's page


NAMED_KEYS = frozenset(
    {
        "Enter", "Tab", "Backspace", "Delete", "Escape", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown",
        "Home", "End", "PageUp", "PageDown", "Shift+Tab",
    }
)  # fmt: skip
OWNER_TEXT_MAX = 256
SCROLL_MAX = 3_000.0


def owner_input_problem(data: object) -> str | None:
    """Why the owner's live-view input is not one this page accepts (a click, a key, text, a scroll), or None."""
    if not isinstance(data, dict):
        return "input must be an object."
    kind = data.get("kind")
    fields = {
        "click": {"kind", "x", "y"},
        "key": {"kind", "key"},
        "text": {"kind", "text"},
        "scroll": {"kind", "delta_y"},
    }
    if kind not in fields:
        return "input.kind must be click, key, text or scroll."
    if set(data) != fields[kind]:
        return f"input of kind {kind} takes exactly: {', '.join(sorted(fields[kind]))}."

    def number(value: object, low: float, high: float) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high

    if kind == "click" and not (number(data["x"], 0, VIEWPORT["width"]) and number(data["y"], 0, VIEWPORT["height"])):
        return f"A click is at x 0-{VIEWPORT['width']}, y 0-{VIEWPORT['height']} (page pixels)."
    if kind == "key" and data["key"] not in NAMED_KEYS:
        return "input.key must be a named key (Enter, Tab, Backspace, arrows, ...); characters go as text."
    if kind == "text" and not (isinstance(data["text"], str) and 1 <= len(data["text"]) <= OWNER_TEXT_MAX):
        return f"input.text must be 1-{OWNER_TEXT_MAX} characters."
    if kind == "scroll" and not number(data["delta_y"], -SCROLL_MAX, SCROLL_MAX):
        return f"input.delta_y must be within ±{SCROLL_MAX:g}."
    return None
