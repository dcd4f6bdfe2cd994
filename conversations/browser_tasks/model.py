"""What a browser task's own model is told and may do: its instructions, its ten tools, each step's request.

Each step sends the goal, the restrictions, the steps so far (as the model's own tool calls
with their results) and the current page as text. The page is the last user message, so
only the current page is ever sent, never stale ones.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from conversations.providers.base import ModelRequest, ToolDefinition
from tools.kit import object_schema

ACTION_TOOLS = ("go_to", "click", "type", "select", "scroll", "wait")
PAUSE_TOOLS = ("ask_owner", "request_sign_in", "request_email_consent")
TEXT_MAX = 2_000
STEP_OUTPUT_TOKENS = 1_024

INSTRUCTIONS = (Path(__file__).parent / "task_instructions.txt").read_text(encoding="utf-8")

_ELEMENT = {
    "type": "integer",
    "minimum": 1,
    "maximum": 10_000,
    "description": "The element's number on the current page.",
}
_CRITICAL_POINT = {
    "type": "string",
    "maxLength": 64,
    "description": "Only when repeating an action the owner approved: that answer's critical_point_id.",
}


def _action(name: str, description: str, **properties: dict[str, Any]) -> ToolDefinition:
    """An action on the page: its properties are required; any action may repeat one the owner approved."""
    schema = object_schema({**properties, "critical_point_id": _CRITICAL_POINT}, required=list(properties))
    return ToolDefinition(name, description, schema)


TOOLS: list[ToolDefinition] = [
    _action("go_to", "Open a URL in the browser.", url={"type": "string", "minLength": 1, "maxLength": 2048}),
    _action("click", "Click an element of the current page.", element=_ELEMENT),
    _action(
        "type",
        "Replace the text of a text field of the current page with this text.",
        element=_ELEMENT,
        text={"type": "string", "maxLength": TEXT_MAX},
    ),
    _action(
        "select",
        "Choose an option (by its text) of a select element of the current page.",
        element=_ELEMENT,
        option={"type": "string", "minLength": 1, "maxLength": 200},
    ),
    _action("scroll", "Scroll the page up or down.", direction={"type": "string", "enum": ["up", "down"]}),
    _action(
        "wait",
        "Wait a few seconds for the page to change.",
        seconds={"type": "integer", "minimum": 1, "maximum": 10},
    ),
    ToolDefinition(
        "ask_owner",
        "Pause and ask the owner a question about the task (never for a password or other secret).",
        object_schema({"question": {"type": "string", "minLength": 1, "maxLength": 1000}}),
    ),
    ToolDefinition(
        "request_sign_in",
        "Pause so that the owner signs in on the current page themselves; say why.",
        object_schema({"reason": {"type": "string", "minLength": 1, "maxLength": 1000}}),
    ),
    ToolDefinition(
        "request_email_consent",
        "Pause and ask the owner for consent before sending an email or message on their behalf. Name the element "
        "that sends it (once the message is written): the consent then allows exactly that one click.",
        object_schema(
            {"question": {"type": "string", "minLength": 1, "maxLength": 1000}, "element": _ELEMENT},
            required=["question"],
        ),
    ),
    ToolDefinition(
        "finish",
        "End the task: completed (say only what the page confirmed) or failed (say why).",
        object_schema(
            {
                "outcome": {"type": "string", "enum": ["completed", "failed"]},
                "summary": {"type": "string", "minLength": 1, "maxLength": TEXT_MAX},
            },
            required=["outcome", "summary"],
        ),
    ),
]
TOOL_NAMES = tuple(tool.name for tool in TOOLS)
SCHEMAS = {tool.name: tool.input_schema for tool in TOOLS}


def task_brief(*, goal: str, start_url: str, restrictions: list[str]) -> str:
    lines = ["Goal:", goal, "", f"Start URL: {start_url}", "", "Restrictions (keep every one):"]
    lines += [f"- {restriction}" for restriction in restrictions] or ["(none)"]
    return "\n".join(lines)


def step_request(
    *,
    goal: str,
    start_url: str,
    restrictions: list[str],
    steps: list[dict[str, Any]],
    page: str,
    notes: list[str],
) -> ModelRequest:
    """The request of one step: the brief, the steps so far as tool calls and results, the current page."""
    parts: list[dict[str, Any]] = [
        {
            "type": "tool",
            "tool_call_id": step["id"],
            "name": step["name"],
            "input": step["input"],
            "output": step["result"],
            "step": index,
        }
        for index, step in enumerate(steps)
    ]
    transcript: list[dict[str, Any]] = [
        {
            "role": "user",
            "parts": [{"type": "text", "text": task_brief(goal=goal, start_url=start_url, restrictions=restrictions)}],
        }
    ]
    if parts:
        transcript.append({"role": "assistant", "parts": parts})
    current = "\n\n".join([*notes, "The current page:\n\n" + page, "Choose your next action: exactly one tool call."])
    transcript.append({"role": "user", "parts": [{"type": "text", "text": current}]})
    return ModelRequest(
        system=INSTRUCTIONS,
        transcript=transcript,
        tools=list(TOOLS),
        may_call_tools=True,
        max_tokens=STEP_OUTPUT_TOKENS,
    )


def action_digest(*, name: str, data: dict[str, Any], element: dict[str, Any], url: str) -> str:
    """Identify an action exactly: the tool, its input (typed text included), the element and the page."""
    canonical = {
        "name": name,
        "input": {key: value for key, value in data.items() if key != "critical_point_id"},
        "element": {key: element.get(key) for key in ("number", "role", "name", "tag", "type", "field")},
        "url": url,
    }
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()
