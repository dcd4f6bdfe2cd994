"""The tool registry: which tools the model may call, and what each one promises.

Every tool is a declaration (`Tool`) registered from its app's `AppConfig.ready()`; the
engine offers the model exactly the registered tools, nothing assembled implicitly. The
declaration is a contract the engine enforces (`tools.runtime`), not advice:

- `input_schema` is checked with `jsonschema` before the call; the tool never sees
  input that does not match it.
- `deadline` bounds every call; at the deadline the call is cancelled, given `GRACE`
  seconds (its `cleanup` hook included) and recorded as failed.
- `effect` says whether a call may run again: `read` calls cut off by a crash are re-run
  by recovery, `effect` calls never are (their outcome stays unknown).
- `available` is asked once per turn; an unavailable tool is still offered but answers
  at once with what the owner must configure.
- `concurrency` limits the calls running at once across the whole installation.
- `output_limit` bounds the JSON the model and the transcript receive.
- `keeps_partial` lets a stopped call hand back what it had (as `partial`); the outcome
  stays cancelled or timed out.
- `reads_untrusted` marks a tool whose output comes from outside (the web): a
  conversation that holds such output has its memory and task writes proposed to the
  owner instead of done (`ToolContext.untrusted_read`, `tools.proposals`).
- `write_confirmed` is how a write the tool proposed instead of doing is done once the
  owner confirms it (`tools.proposals`).
- `cites_sources` says that the tool's result carries `sources` (`tools.web.sources`),
  which the chat page lists under the answer; the page learns these names from its
  template (`tools_citing_sources`), not from a list of its own.

Every app registers its tools in one line of its `AppConfig.ready()`: `tools_register(...)`.
Shared pieces of a declaration (schemas, refusals, card summaries, the write guard) are in
`tools.kit`.

Credentials reach a tool through its `ToolContext` (`provider_key`), never by importing
an upper app.
"""

from __future__ import annotations

import asyncio
import enum
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from flarebot.core.crypto import Secret

if TYPE_CHECKING:  # the registry is imported before Django's apps are ready
    from tools.slots import SlotHeld

# Seconds a cancelled or timed-out call has to wind down, its cleanup hook included.
GRACE = 5.0
# No tool may declare a longer deadline: a turn must always come to an end.
MAX_DEADLINE = 15 * 60.0
# What the model and the transcript receive of one call, as compact UTF-8 JSON.
OUTPUT_LIMIT = 64 * 1024
OUTPUT_LIMIT_MIN = 1024  # room for the truncation marker and a useful start
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class Effect(enum.StrEnum):
    READ = "read"  # safe to run again after a crash
    EFFECT = "effect"  # changes something outside the turn: never re-run by recovery


@dataclass(frozen=True)
class KeyMissing:
    """Why a provider's key cannot reach a tool: none is stored, or the stored one no longer opens."""

    state: Literal["missing", "unreadable"]
    message: str  # what the owner does next, in words


@dataclass(frozen=True)
class ToolContext:
    """What a running tool call knows about where it runs, and how it reports progress."""

    conversation_id: uuid.UUID
    turn_id: uuid.UUID
    tool_call_id: str
    cancelled: asyncio.Event
    report_progress: Callable[[dict[str, Any]], Awaitable[None]]
    # The owner's key of a provider ("openai", "anthropic"), or why there is none to use.
    provider_key: Callable[[str], Awaitable[Secret | KeyMissing]] = field(repr=False)
    # Whether the call's conversation is still active (not being deleted). Synchronous: a
    # tool that writes calls it inside its own transaction, on its database thread, right
    # before the write, together with `cancelled.is_set()`.
    conversation_live: Callable[[], bool] = field(repr=False)
    # Whether what the model saw may have been steered by untrusted content (a web tool's
    # output, a browser task's pages): then a write outside the turn is only proposed to
    # the owner (`tools.proposals`). Synchronous, on a database thread.
    untrusted_read: Callable[[], bool] = field(repr=False)
    # The call's place under its tool's concurrency limit (None without a limit).
    place: Place | None = None
    # Tells the owner, on the call's activity card alone (never the model, which must not
    # talk anyone into widening a policy), what an operator can do about its outcome: a
    # refused URL's allowlist entry (`tools.network.policy.operator_hint`). Synchronous.
    hint_owner: Callable[[str], None] = field(default=lambda _hint: None, repr=False)


@dataclass
class Place:
    """A place a call holds under its tool's concurrency limit.

    The runtime gives it back when the call's work has stopped, unless the tool called
    `keep()`: then the tool owns it (a container whose removal is still pending keeps
    counting toward the limit) and gives it back itself with `tools.slots.slot_release`.
    """

    held: SlotHeld
    kept: bool = False

    def keep(self) -> None:
        self.kept = True


@dataclass(frozen=True)
class CleanupRequest:
    """What a tool's cleanup hook must release.

    On cancel and timeout: the resources of one call. On conversation deletion
    (`reason="deleted"`, no turn or call): everything the tool holds for the conversation.
    """

    conversation_id: uuid.UUID
    turn_id: uuid.UUID | None
    tool_call_id: str | None
    reason: Literal["cancelled", "timeout", "deleted"]


ToolRun = Callable[[ToolContext, dict[str, Any]], Awaitable[Any]]
# Returns None when the tool can run, else a safe message saying what the owner must configure.
AvailabilityCheck = Callable[[ToolContext], Awaitable[str | None]]
CleanupHook = Callable[[CleanupRequest], Awaitable[None]]
# A confirmed proposal's write: (conversation_id=, tool_call_id=, data=) -> the tool's own result.
ConfirmedWrite = Callable[..., dict[str, Any]]


class ToolDeclarationError(ValueError):
    """A tool declaration breaks the registry's contract (a programming error)."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: ToolRun
    deadline: float  # seconds; required, at most MAX_DEADLINE
    effect: Effect
    label: str = ""  # the activity card's label; the name when empty
    # The label once the call succeeded ("Ran a shell command" after "Running a shell
    # command"); the label when empty.
    done_label: str = ""
    # Makes the activity card's summary from a successful result. Only what it returns is
    # shown (bounded to 160 characters); without it a successful call shows no summary.
    summarize: Callable[[Any], str] | None = None
    available: AvailabilityCheck | None = None
    concurrency: int | None = None  # calls at once across every worker process
    # When every place is taken: wait for one (up to the deadline), or fail at once.
    concurrency_wait: bool = True
    output_limit: int = OUTPUT_LIMIT
    cleanup: CleanupHook | None = None
    # A call stopped by cancel or its deadline that still returns a value within GRACE (what
    # a shell command printed so far) has it kept as `partial` beside the engine's outcome;
    # otherwise such a value is discarded.
    keeps_partial: bool = False
    # Its output is content from outside the machine (a web page, search results): the model
    # may be steered by it, so the turn's writes outside the turn become proposals.
    reads_untrusted: bool = False
    # Its successful result carries `sources` (web pages read or found) listed under the answer.
    cites_sources: bool = False
    # How a write this tool proposed to the owner (`tools.proposals.write_propose`) is done
    # once they confirm it; synchronous, on a database thread.
    write_confirmed: ConfirmedWrite | None = field(default=None, repr=False)
    validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ToolDeclarationError(f"tool name {self.name!r}: lowercase letters, digits and _, at most 64")
        if not 0 < self.deadline <= MAX_DEADLINE:
            raise ToolDeclarationError(f"tool {self.name}: a deadline of 0-{MAX_DEADLINE:g} s is required")
        if not isinstance(self.effect, Effect):
            raise ToolDeclarationError(f"tool {self.name}: effect must be Effect.READ or Effect.EFFECT")
        if self.concurrency is not None and self.concurrency < 1:
            raise ToolDeclarationError(f"tool {self.name}: concurrency must be at least 1")
        if not OUTPUT_LIMIT_MIN <= self.output_limit <= OUTPUT_LIMIT:
            bounds = f"{OUTPUT_LIMIT_MIN}-{OUTPUT_LIMIT}"
            raise ToolDeclarationError(f"tool {self.name}: output_limit must be {bounds} bytes")
        try:
            Draft202012Validator.check_schema(self.input_schema)
        except SchemaError as error:
            raise ToolDeclarationError(f"tool {self.name}: invalid input schema: {error.message}") from None
        if self.input_schema.get("type") != "object":
            raise ToolDeclarationError(f"tool {self.name}: the input schema must describe an object")
        object.__setattr__(self, "validator", Draft202012Validator(self.input_schema))


class ToolFailed(Exception):
    """A tool failed; `message` is safe to show to the owner and the model."""

    def __init__(self, message: str) -> None:
        self.message = message[:500]
        super().__init__(self.message)


_tools: dict[str, Tool] = {}


def tool_register(tool: Tool) -> None:
    """Offer a tool to the model in every turn from now on."""
    _tools[tool.name] = tool


def tools_register(tools: Iterable[Tool]) -> None:
    """Offer an app's tools to the model: the one line of its `AppConfig.ready()`."""
    for tool in tools:
        tool_register(tool)


def tool_unregister(name: str) -> None:
    _tools.pop(name, None)


def tools_enabled() -> list[Tool]:
    """Return the tools offered to the model, in a stable order."""
    return [_tools[name] for name in sorted(_tools)]


def tool_get(name: str) -> Tool | None:
    return _tools.get(name)


def reads_untrusted(names: Iterable[str]) -> bool:
    """Whether any of these tools' output comes from outside (see `Tool.reads_untrusted`)."""
    return any(tool.reads_untrusted for name in names if (tool := _tools.get(name)) is not None)


def tools_citing_sources() -> list[str]:
    """The names of the tools whose results carry sources (see `Tool.cites_sources`)."""
    return sorted(name for name, tool in _tools.items() if tool.cites_sources)
