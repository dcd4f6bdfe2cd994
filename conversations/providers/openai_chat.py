"""OpenAI-style Chat Completions, streamed, with function tools.

Serves the `openai` provider and `local`: any OpenAI-compatible server the operator names
(Ollama, vLLM, llama.cpp server), which needs no key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai

from conversations.providers.base import (
    ModelRequest,
    StepFinished,
    StreamEvent,
    TextDelta,
    ToolCall,
    provider_call_id,
    steps_of,
    tool_output,
)
from conversations.providers.clients import openai_client
from conversations.providers.errors import ProviderError, sdk_errors
from flarebot.core.crypto import Secret


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Translate the system prompt and stored transcript into Chat Completions messages."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}]
    for message in request.transcript:
        if message["role"] == "user":
            text = "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")
            messages.append({"role": "user", "content": _user_content(text, message["parts"])})
            continue
        for texts, tools in steps_of(message["parts"]):
            entry: dict[str, Any] = {"role": "assistant", "content": "".join(p["text"] for p in texts) or None}
            if tools:
                entry["tool_calls"] = [
                    {
                        "id": provider_call_id(p),
                        "type": "function",
                        "function": {"name": p["name"], "arguments": json.dumps(p["input"])},
                    }
                    for p in tools
                ]
            messages.append(entry)
            messages += [
                {"role": "tool", "tool_call_id": provider_call_id(p), "content": json.dumps(tool_output(p))}
                for p in tools
            ]
    return messages


def _user_content(text: str, parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A user message's content: its text, or content parts when an image is attached (images as data URLs).

    Files given as text (attachments.content decided the way) follow the message's text, so a
    server that takes no content parts (a local model) still gets a plain string.
    """
    files = [p for p in parts if p["type"] == "attachment"]
    if not any(p.get("mode") == "image" for p in files):
        return "\n\n".join([text] * bool(text) + [p["text"] for p in files])
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for part in files:
        content.append({"type": "text", "text": part["text"]})
        if part.get("mode") == "image":
            url = f"data:{part['media_type']};base64,{part['data']}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    return content


class ChatCompletionsAdapter:
    def __init__(self, *, base_url: str, label: str, needs_key: bool, max_tokens_field: str) -> None:
        self.base_url = base_url
        self.label = label
        self.needs_key = needs_key
        self.max_tokens_field = max_tokens_field

    async def stream(self, request: ModelRequest, *, model: str, key: Secret | None) -> AsyncIterator[StreamEvent]:
        if self.needs_key and key is None:
            raise ProviderError("provider_key_missing", f"Add an {self.label} API key in Settings to use this model.")
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": chat_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
            self.max_tokens_field: request.max_tokens,
        }
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in request.tools
            ]
            if not request.may_call_tools:
                kwargs["tool_choice"] = "none"
        async with openai_client(self.base_url, key if self.needs_key else None) as client:
            with sdk_errors(openai, self.label, keyed=self.needs_key):
                stream = await client.chat.completions.create(**kwargs)
            try:
                async for event in self._events(stream):
                    yield event
            finally:
                await stream.close()

    async def _events(self, stream: Any) -> AsyncIterator[StreamEvent]:
        calls = _StreamedCalls()
        stop_reason, input_tokens, output_tokens = "stop", 0, 0
        with sdk_errors(openai, self.label, keyed=self.needs_key, answering=True):
            async for chunk in stream:
                if chunk.usage is not None:
                    input_tokens = chunk.usage.prompt_tokens or 0
                    output_tokens = chunk.usage.completion_tokens or 0
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if delta is not None and delta.content:
                        yield TextDelta(delta.content)
                    for call in (delta.tool_calls if delta is not None else None) or []:
                        calls.add(call)
                    if choice.finish_reason:
                        stop_reason = choice.finish_reason
            for call in calls.complete():
                yield call
        yield StepFinished(stop_reason, input_tokens, output_tokens)


class _StreamedCalls:
    """A step's tool calls, put together from their streamed pieces.

    Pieces of one call share its `index`; its name comes once, in its first piece. Some
    OpenAI-compatible servers give every call the same index (or none): a piece that names
    a tool where the call at its index has a name already starts the next call. Ids are
    the provider's (kept to answer it) and may be empty or repeated: the engine gives each
    call its own identity.
    """

    def __init__(self) -> None:
        self._calls: list[dict[str, str]] = []
        self._at: dict[int, dict[str, str]] = {}

    def add(self, piece: Any) -> None:
        index = piece.index if isinstance(piece.index, int) else 0
        name = piece.function.name if piece.function is not None else None
        entry = self._at.get(index)
        if entry is None or (name and entry["name"]):
            entry = {"id": "", "name": "", "arguments": ""}
            self._calls.append(entry)
            self._at[index] = entry
        entry["id"] = piece.id or entry["id"]
        if piece.function is not None:
            entry["name"] = name or entry["name"]
            entry["arguments"] += piece.function.arguments or ""

    def complete(self) -> list[ToolCall]:
        if any(not entry["name"] for entry in self._calls):
            raise ValueError("tool call without a name")
        return [
            ToolCall("", entry["name"], _arguments(entry["arguments"]), provider_id=entry["id"])
            for entry in self._calls
        ]


def _arguments(raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("tool arguments must be an object")
    return value
