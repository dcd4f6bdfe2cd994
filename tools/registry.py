"""The tool registry: which tools the model may call, and how each one runs.

Tools register themselves at import (their app's `ready()`); the engine offers the model
exactly the registered tools, nothing assembled implicitly.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class ToolContext:
    """What a running tool call knows about where it runs, and how it reports progress."""

    conversation_id: uuid.UUID
    turn_id: uuid.UUID
    tool_call_id: str
    cancelled: asyncio.Event
    report_progress: Callable[[dict[str, Any]], Awaitable[None]]


ToolRun = Callable[[ToolContext, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: ToolRun
    label: str = ""  # the activity card's label; the name when empty
    # Makes the activity card's summary from a successful result. Only what it returns is
    # shown (bounded to 160 characters); without it a successful call shows no summary.
    summarize: Callable[[Any], str] | None = None


class ToolFailed(Exception):
    """A tool failed; `message` is safe to show to the owner and the model."""

    def __init__(self, message: str) -> None:
        self.message = message[:500]
        super().__init__(self.message)


_tools: dict[str, Tool] = {}


def tool_register(tool: Tool) -> None:
    """Offer a tool to the model in every turn from now on."""
    _tools[tool.name] = tool


def tool_unregister(name: str) -> None:
    _tools.pop(name, None)


def tools_enabled() -> list[Tool]:
    """Return the tools offered to the model, in a stable order."""
    return [_tools[name] for name in sorted(_tools)]


def tool_get(name: str) -> Tool | None:
    return _tools.get(name)
