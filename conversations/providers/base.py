"""The provider-neutral request and stream that the turn engine speaks."""

from __future__ import annotations

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
    id: str
    name: str
    input: dict[str, Any]


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
