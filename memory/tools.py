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
from memory import services
from memory.errors import FactConflict, MemoryFull, WriteAbandoned
from memory.models import Fact, FactState
from memory.query import QUERY_MAX, TOKENS_MAX
from memory.selectors import RESULTS_MAX, fact_text, facts_recall
from tools.kit import (
    call_wanted,
    card_summary,
    count_of,
    id_of,
    id_property,
    object_schema,
    refusal,
    refused,
    version_property,
)
from tools.proposals import Readback, readback_of, write_propose
from tools.registry import Effect, Tool, ToolContext, ToolFailed

DEADLINE = 15.0  # seconds: a write may wait for the database's write lock

# Lengths are checked by the tools themselves, not the schema: the limits count UTF-16 code
# units (JSON Schema counts code points), and a schema error would quote the text.
_CONTENT = {
    "type": "string",
    "minLength": 1,
    "description": f"The fact, self-contained, at most {services.MAX_CONTENT:,} characters.",
}
_ID = id_property("The fact's id, as recall or the prompt gave it.")
_VERSION = version_property("fact")


def _proceed(context: ToolContext) -> services.Proceed:
    return lambda: call_wanted(context)


def _fact(fact: Fact) -> dict[str, Any]:
    return {"id": str(fact.id), "content": fact.content, "version": fact.version}


def _refused(error: FlarebotError) -> dict[str, Any]:
    """The result of a write the memory refused, with what the model needs to try again."""
    extra: dict[str, Any] = {}
    if isinstance(error, FactConflict):
        current = error.current
        extra["current"] = {"id": current["id"], "content": current["content"], "version": current["version"]}
    if isinstance(error, MemoryFull):
        extra["limit"] = services.MAX_FACTS
    if error.code == "fact_too_long":
        extra["limit"] = services.MAX_CONTENT
    return refused(error, **extra)


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
        message = "This call's fact was stored before and has since been forgotten; it was not stored again."
        return refusal("forgotten", message)
    return {"ok": True, "fact": _fact(fact), "replayed": not created}


def _update(*, data: dict[str, Any], proceed: Any, **_: Any) -> dict[str, Any]:
    try:
        fact = services.fact_update(
            fact_id=id_of(data), content=data["content"], version=data["version"], proceed=proceed
        )
    except WriteAbandoned:
        raise
    except FlarebotError as error:
        return _refused(error)
    return {"ok": True, "fact": _fact(fact)}


def _forget(*, data: dict[str, Any], proceed: Any, **_: Any) -> dict[str, Any]:
    try:
        deleted = services.fact_delete(fact_id=id_of(data), version=data["version"], proceed=proceed)
    except WriteAbandoned:
        raise
    except FlarebotError as error:
        return _refused(error)
    # Forgetting a fact that is not there is done already, as DELETE answers 204.
    return {"ok": True, "id": data["id"], "forgotten": True, "was_present": deleted}


def _readback(tool: str, data: dict[str, Any]) -> Readback:
    current = fact_text(fact_id=id_of(data)) if "id" in data else None
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
                services.fact_content_clean(data["content"])
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
        return refused(error, limit=QUERY_MAX)
    return {"ok": True, "facts": facts}


# Card summaries: static words and counts only, never a fact's text or the model's query.
_FAILED = {
    "memory_full": f"Not stored: memory is full ({services.MAX_FACTS} facts)",
    "fact_too_long": f"Not stored: longer than {services.MAX_CONTENT:,} characters",
    "invalid_fact": "Not stored: the text is not a valid fact",
    "version_conflict": "Not changed: the fact was changed elsewhere",
    "not_found": "Not changed: no such fact",
    "forgotten": "Not stored again: this fact was forgotten",
    "query_too_long": f"Not searched: longer than {QUERY_MAX:,} characters",
}


def _summary(done: str) -> Any:
    def success(output: dict[str, Any]) -> str:
        if isinstance(output.get("facts"), list):
            return "Found " + count_of(len(output["facts"]), "fact")
        if output.get("replayed"):
            return "Already remembered"
        if output.get("was_present") is False:
            return "Already forgotten"
        return done

    return card_summary(success, failed=_FAILED)


def _write_tool(name: str, description: str, schema: dict[str, Any], label: str, done: str) -> Tool:
    """Declare one of the three writes: an effect, proposed to the owner in a conversation that read the web."""

    async def run(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        return await _tool_write(name, context, data)

    return Tool(
        name,
        description,
        schema,
        run,
        deadline=DEADLINE,
        effect=Effect.EFFECT,
        label=label,
        summarize=_summary(done),
        output_limit=8 * 1024,
        write_confirmed=_confirmed(name),
    )


TOOLS = [
    _write_tool(
        "remember",
        "Store a fact in the owner's long-term memory, which reaches later turns of every conversation. "
        f"Use it when the owner asks you to remember something. At most {services.MAX_FACTS} facts.",
        object_schema({"content": _CONTENT}),
        "Remember a fact",
        "Remembered a fact",
    ),
    _write_tool(
        "update_memory",
        "Replace the text of a remembered fact. Give its id and the version you last saw.",
        object_schema({"id": _ID, "content": _CONTENT, "version": _VERSION}),
        "Update a remembered fact",
        "Updated a fact",
    ),
    _write_tool(
        "forget",
        "Delete a remembered fact for good. Give its id and the version you last saw.",
        object_schema({"id": _ID, "version": _VERSION}),
        "Forget a fact",
        "Forgot a fact",
    ),
    Tool(
        "recall",
        f"Search the owner's memory by words (any of them; at most {QUERY_MAX:,} characters, the first "
        f"{TOKENS_MAX} words count). Returns at most {RESULTS_MAX} facts with their id and version.",
        object_schema({"query": {"type": "string", "description": "Words the facts may contain."}}),
        recall,
        deadline=DEADLINE,
        effect=Effect.READ,
        label="Search memory",
        summarize=_summary("Searched memory"),
        output_limit=32 * 1024,
    ),
]
