"""What every tool module would otherwise write again, said once (docs/tools.md).

- Schemas: `object_schema` (no other properties; all required unless said), the id and
  version fields of a row the model names, and `UUID_PATTERN`, the lowercase form the model
  is shown every id in, so `id_of` parses exactly what the schema let through.
- Results: `refusal` (or `refused`, from a domain error) is a call the tool declined in a
  way the model can act on; it counts as failed on the card, and its message goes to the
  model.
- Card summaries: `card_summary` shows a result in the tool's own words and a refusal in
  static words, from a table of codes or the refusal's own message: never raw input
  (`count_of` words a count).
- The write guard: `call_wanted` and `call_check` say whether a call may still write (not
  stopped, its conversation not being deleted). Both are synchronous: call them on a
  database thread, inside the write's transaction, right before writing. `stopped_check`
  asks the cancel flag alone, so it may run on the engine loop before any database work.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from flarebot.core.errors import FlarebotError
from flarebot.core.rows import MAX_VERSION
from tools.registry import ToolContext, ToolFailed

UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
NOT_DONE = "Not done"  # the card's words for a refusal its tool's table does not name
# Refusals every table shares: a write proposed to the owner (tools.proposals) waits for them.
_FAILED_ALWAYS = {"needs_confirmation": "Waiting for your confirmation"}

Schema = dict[str, Any]
Summarize = Callable[[Any], str]


def object_schema(properties: Mapping[str, Schema], *, required: list[str] | None = None) -> Schema:
    """Return the input schema of an object with these properties only (all required unless listed)."""
    names = list(properties) if required is None else required
    return {"type": "object", "properties": dict(properties), "required": names, "additionalProperties": False}


def id_property(description: str) -> Schema:
    """Return the schema of a row's id as the model was shown it (a lowercase UUID)."""
    return {"type": "string", "pattern": UUID_PATTERN, "description": description}


def version_property(thing: str) -> Schema:
    """Return the schema of the version a write compares (`thing`: "fact", "task")."""
    return {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_VERSION,
        "description": f"The version you last saw; a stale one changes nothing and returns the current {thing}.",
    }


def id_of(data: Mapping[str, Any], key: str = "id") -> uuid.UUID:
    """Return the id the input carries under `key` (it matched `UUID_PATTERN`)."""
    return uuid.UUID(data[key])


def refusal(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """Return the result of a call the tool declined: failed on its card, `message` for the model."""
    return {"ok": False, "error": code, "message": message, **extra}


def refused(error: FlarebotError, **extra: Any) -> dict[str, Any]:
    """Return the refusal of a domain error, by its code and its safe message."""
    return refusal(error.code, error.message, **extra)


def card_summary(success: Callable[[dict[str, Any]], str], *, failed: Mapping[str, str] | None = None) -> Summarize:
    """Return a card's summary: `success(result)`, or a refusal in `failed`'s words (else its own message)."""
    table = None if failed is None else {**_FAILED_ALWAYS, **failed}

    def summarize(output: Any) -> str:
        if not isinstance(output, dict):
            return ""
        if output.get("ok") is not False:
            return success(output)
        if table is None:
            return str(output.get("message", ""))
        return table.get(str(output.get("error")), NOT_DONE)

    return summarize


def count_of(count: int, noun: str) -> str:
    """Return "1 fact", "2 facts": a card's count in words."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def call_wanted(context: ToolContext) -> bool:
    """Whether the call may still write: not stopped, and its conversation not being deleted."""
    return not context.cancelled.is_set() and context.conversation_live()


def stopped_check(context: ToolContext, *, nothing_was: str) -> None:
    """Raise `ToolFailed` ("Nothing was <nothing_was>: ...") when the call was stopped (safe on the loop)."""
    if context.cancelled.is_set():
        raise ToolFailed(f"Nothing was {nothing_was}: the turn was stopped.")


def call_check(context: ToolContext, *, nothing_was: str) -> None:
    """Raise `ToolFailed` ("Nothing was <nothing_was>: ...") unless the call may still write."""
    stopped_check(context, nothing_was=nothing_was)
    if not context.conversation_live():
        raise ToolFailed(f"Nothing was {nothing_was}: this conversation is being deleted.")
