"""The provider-neutral request and stream that the turn engine speaks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from flarebot.core.crypto import Secret

MAX_OUTPUT_TOKENS = 4096


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    """What one model step is asked: instructions, transcript and the tools it may call.

    `transcript` holds messages as stored: {"role", "parts"} with text and tool parts.
    """

    system: str
    transcript: list[dict[str, Any]]
    tools: list[ToolDefinition] = field(default_factory=list)
    # False on the last step: the tools are still described (the transcript holds calls
    # and results, which providers only accept next to tool definitions) but the model
    # may not call one, so it must answer in text.
    may_call_tools: bool = True
    max_tokens: int = MAX_OUTPUT_TOKENS


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call of a model step.

    `provider_id` is the provider's id for the call: provider data, used only to answer the
    provider with the call's result. Some OpenAI-compatible servers repeat one id for every
    call, send an empty one, or send ids of any length. `id` is the engine's identity of the
    call (`engine_call_id`: turn, step, index), given when the step's calls are recorded;
    everything that names a call (its tool part, card, events, leases, idempotency keys)
    uses it. An adapter yields calls with `id` empty.
    """

    id: str
    name: str
    input: dict[str, Any]
    provider_id: str = ""


def engine_call_id(turn_id: uuid.UUID, step: int, index: int) -> str:
    """The engine's identity of the `index`-th call of a turn's `step`: unique, at most 48 characters of [a-z0-9_]."""
    return f"call_{turn_id.hex}_{step}_{index}"


def provider_call_id(part: dict[str, Any]) -> str:
    """The id to answer the provider with for a stored tool part.

    The provider's own id; the engine's where the provider gave none (an empty id) and in
    parts stored before the engine had its own, whose `tool_call_id` is the provider's.
    """
    return str(part.get("provider_call_id") or part["tool_call_id"])


@dataclass(frozen=True)
class StepFinished:
    stop_reason: str
    input_tokens: int = 0
    output_tokens: int = 0


StreamEvent = TextDelta | ToolCall | StepFinished


class Adapter(Protocol):
    def stream(self, request: ModelRequest, *, model: str, key: Secret | None) -> AsyncIterator[StreamEvent]: ...


INTERRUPTED_OUTPUT = {"error": "interrupted", "message": "The tool call was interrupted; its outcome is unknown."}


def tool_output(part: dict[str, Any]) -> Any:
    """Return a stored tool part's output, or the interrupted marker when it has none."""
    return part["output"] if part.get("output") is not None else INTERRUPTED_OUTPUT


def steps_of(parts: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """Split an assistant message's parts into model steps: (text parts, tool parts) each.

    Parts carry the `step` they were produced in; older parts without it start a new step
    when text follows tool calls.
    """
    steps: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []
    current_step: object = object()
    for part in parts:
        step = part.get("step")
        new_step = not steps or (step is not None and step != current_step)
        if step is None and steps and part["type"] == "text" and steps[-1][1]:
            new_step = True
        if new_step:
            steps.append(([], []))
            current_step = step
        texts, tools = steps[-1]
        if part["type"] == "text":
            if part.get("text"):
                texts.append(part)
        elif part["type"] == "tool":
            tools.append(part)
    return [step for step in steps if step[0] or step[1]]
