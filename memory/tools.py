"""The memory tools the model may call: remember, update_memory, forget (effects) and recall (a read).

Outcomes:
- What the memory refuses and the model can act on (a stale version, the limit, too long,
  blank, an unknown id) is a result `{"ok": false, "error", "message", ...}` with the
  current fact or the limit beside it. The call counts as failed on its card, and the
  card shows only the static summary of `_summary`: a fact's text never reaches a card.
- A write that finds its turn stopped or its conversation being deleted raises
  `ToolFailed`: the call did not happen. A fact committed before that stays.

Each write runs in its own transaction on a database thread and calls `proceed` (the
call's cancel flag and `ToolContext.conversation_live`) inside it, right before writing.
`remember` makes the fact's id from the conversation and the tool call id, so a call
replayed after a lost reply finds its fact, or its tombstone, and writes nothing again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from flarebot.core.database import db
from flarebot.core.errors import FlarebotError
from flarebot.core.rows import MAX_VERSION
from memory import services
from memory.errors import FactConflict, MemoryFull, WriteAbandoned
from memory.models import Fact, FactState
from memory.query import QUERY_MAX, TOKENS_MAX
from memory.selectors import RESULTS_MAX, fact_text, facts_recall
from tools.proposals import Readback, readback_of, write_executor_register, write_propose
from tools.registry import Effect, Tool, ToolContext, ToolFailed, tool_register

DEADLINE = 15.0  # seconds: a write may wait for the database's write lock
UUID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

# Lengths are checked by the tools themselves, not the schema: the limits count UTF-16 code
# units (JSON Schema counts code points), and a schema error would quote the text.
_CONTENT = {
    "type": "string",
    "minLength": 1,
    "description": f"The fact, self-contained, at most {services.MAX_CONTENT:,} characters.",
}
_ID = {"type": "string", "pattern": UUID_PATTERN, "description": "The fact's id, as recall or the prompt gave it."}
_VERSION = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_VERSION,
    "description": "The version you last saw; a stale one changes nothing and returns the current fact.",
}


def _schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _proceed(context: ToolContext) -> services.Proceed:
    def proceed() -> bool:
        return not context.cancelled.is_set() and context.conversation_live()

    return proceed


def _fact(fact: Fact) -> dict[str, Any]:
    return {"id": str(fact.id), "content": fact.content, "version": fact.version}


def _refused(error: FlarebotError) -> dict[str, Any]:
    """The result of a write the memory refused, with what the model needs to try again."""
    result: dict[str, Any] = {"ok": False, "error": error.code, "message": error.message}
    if isinstance(error, FactConflict):
        current = error.current
        result["current"] = {"id": current["id"], "content": current["content"], "version": current["version"]}
    if isinstance(error, MemoryFull):
        result["limit"] = services.MAX_FACTS
    if error.code == "fact_too_long":
        result["limit"] = services.MAX_CONTENT
    return result


async def _write(function: Any, **kwargs: Any) -> Any:
    try:
        return await db(function)(**kwargs)
    except WriteAbandoned as abandoned:
        raise ToolFailed(abandoned.message) from None


# Each write, as the tool does it and as the owner's Confirm of a proposal does it.


def _remember(*, conversation_id: uuid.UUID, tool_call_id: str, data: dict[str, Any], proceed: Any) -> dict[str, Any]:
    fact_id = services.remember_id(conversation_id=conversation_id, tool_call_id=tool_call_id)
    try:
        fact, created = services.fact_remember(fact_id=fact_id, content=data["content"], proceed=proceed)
    except WriteAbandoned:
        raise
    except FlarebotError as error:
        return _refused(error)
    if fact.state != FactState.ACTIVE:
        return {
            "ok": False,
            "error": "forgotten",
            "message": "This call's fact was stored before and has since been forgotten; it was not stored again.",
        }
    return {"ok": True, "fact": _fact(fact), "replayed": not created}


def _update(*, data: dict[str, Any], proceed: Any, **_: Any) -> dict[str, Any]:
    try:
        fact = services.fact_update(
            fact_id=uuid.UUID(data["id"]), content=data["content"], version=data["version"], proceed=proceed
        )
    except WriteAbandoned:
        raise
    except FlarebotError as error:
        return _refused(error)
    return {"ok": True, "fact": _fact(fact)}


def _forget(*, data: dict[str, Any], proceed: Any, **_: Any) -> dict[str, Any]:
    try:
        deleted = services.fact_delete(fact_id=uuid.UUID(data["id"]), version=data["version"], proceed=proceed)
    except WriteAbandoned:
        raise
    except FlarebotError as error:
        return _refused(error)
    # Forgetting a fact that is not there is done already, as DELETE answers 204.
    return {"ok": True, "id": data["id"], "forgotten": True, "was_present": deleted}


def _readback(tool: str, data: dict[str, Any]) -> Readback:
    current = fact_text(fact_id=uuid.UUID(data["id"])) if "id" in data else None
    if tool == "remember":
        return readback_of("Remember a new fact", [data["content"]])
    if tool == "update_memory":
        return readback_of(
            "Change a remembered fact", [f"Now: {current or '(no such fact)'}", f"New: {data['content']}"]
        )
    return readback_of("Forget a remembered fact", [current or "(no such fact)"])


_WRITES: dict[str, Callable[..., dict[str, Any]]] = {
    "remember": _remember,
    "update_memory": _update,
    "forget": _forget,
}


async def _tool_write(tool: str, context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    """Write now, or, when the conversation holds untrusted content, propose it to the owner."""
    if await db(context.untrusted_read)():
        if "content" in data:
            try:
                services.fact_content_check(data["content"])
            except FlarebotError as error:
                return _refused(error)
        readback = await db(_readback)(tool, data)
        return await write_propose(context, tool=tool, data=data, readback=readback)
    return await _write(
        _WRITES[tool],
        conversation_id=context.conversation_id,
        tool_call_id=context.tool_call_id,
        data=data,
        proceed=_proceed(context),
    )


async def remember(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    return await _tool_write("remember", context, data)


async def update_memory(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    return await _tool_write("update_memory", context, data)


async def forget(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    return await _tool_write("forget", context, data)


def _confirmed(tool: str) -> Any:
    def execute(*, conversation_id: uuid.UUID, tool_call_id: str, data: dict[str, Any]) -> dict[str, Any]:
        write = _WRITES[tool]
        # The owner confirmed it from a live conversation (checked where the decision is taken).
        return write(conversation_id=conversation_id, tool_call_id=tool_call_id, data=data, proceed=lambda: True)

    return execute


async def recall(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    try:
        facts = await db(facts_recall)(query=data["query"])
    except FlarebotError as error:
        return {"ok": False, "error": error.code, "message": error.message, "limit": QUERY_MAX}
    return {"ok": True, "facts": facts}


# Card summaries: static words and counts only, never a fact's text or the model's query.
_FAILED = {
    "needs_confirmation": "Waiting for your confirmation",
    "memory_full": f"Not stored: memory is full ({services.MAX_FACTS} facts)",
    "fact_too_long": f"Not stored: longer than {services.MAX_CONTENT:,} characters",
    "invalid_fact": "Not stored: the text is not a valid fact",
    "version_conflict": "Not changed: the fact was changed elsewhere",
    "not_found": "Not changed: no such fact",
    "forgotten": "Not stored again: this fact was forgotten",
    "query_too_long": f"Not searched: longer than {QUERY_MAX:,} characters",
}


def _summary(success: str) -> Any:
    def summarize(output: Any) -> str:
        if not isinstance(output, dict):
            return ""
        if output.get("ok") is False:
            return _FAILED.get(str(output.get("error")), "Not done")
        if "facts" in output and isinstance(output["facts"], list):
            count = len(output["facts"])
            return f"Found {count} fact{'' if count == 1 else 's'}"
        if output.get("replayed"):
            return "Already remembered"
        if output.get("was_present") is False:
            return "Already forgotten"
        return success

    return summarize


TOOLS = [
    Tool(
        "remember",
        "Store a fact in the owner's long-term memory, which reaches later turns of every conversation. "
        f"Use it when the owner asks you to remember something. At most {services.MAX_FACTS} facts.",
        _schema(content=_CONTENT),
        remember,
        deadline=DEADLINE,
        effect=Effect.EFFECT,
        label="Remember a fact",
        summarize=_summary("Remembered a fact"),
        output_limit=8 * 1024,
    ),
    Tool(
        "update_memory",
        "Replace the text of a remembered fact. Give its id and the version you last saw.",
        _schema(id=_ID, content=_CONTENT, version=_VERSION),
        update_memory,
        deadline=DEADLINE,
        effect=Effect.EFFECT,
        label="Update a remembered fact",
        summarize=_summary("Updated a fact"),
        output_limit=8 * 1024,
    ),
    Tool(
        "forget",
        "Delete a remembered fact for good. Give its id and the version you last saw.",
        _schema(id=_ID, version=_VERSION),
        forget,
        deadline=DEADLINE,
        effect=Effect.EFFECT,
        label="Forget a fact",
        summarize=_summary("Forgot a fact"),
        output_limit=8 * 1024,
    ),
    Tool(
        "recall",
        f"Search the owner's memory by words (any of them; at most {QUERY_MAX:,} characters, the first "
        f"{TOKENS_MAX} words count). Returns at most {RESULTS_MAX} facts with their id and version.",
        _schema(query={"type": "string", "description": "Words the facts may contain."}),
        recall,
        deadline=DEADLINE,
        effect=Effect.READ,
        label="Search memory",
        summarize=_summary("Searched memory"),
        output_limit=32 * 1024,
    ),
]


def memory_tools_register() -> None:
    """Offer the memory tools to the model, and say how a confirmed proposal of a write is done."""
    for tool in TOOLS:
        tool_register(tool)
    for name in _WRITES:
        write_executor_register(name, _confirmed(name))
