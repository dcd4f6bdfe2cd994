"""The Anthropic Messages API, streamed, with tool use."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import anthropic

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
from conversations.providers.clients import anthropic_client
from conversations.providers.errors import ProviderError, provider_error_from_status, sdk_errors
from flarebot.core.crypto import Secret

LABEL = "Anthropic"
# Error types Anthropic sends inside a stream (HTTP 200), mapped to the status they mean.
_STREAM_ERROR_STATUS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "invalid_request_error": 400,
    "request_too_large": 413,
}


def anthropic_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """Translate the stored transcript into Messages API turns."""
    messages: list[dict[str, Any]] = []
    for message in request.transcript:
        if message["role"] == "user":
            text = "".join(p.get("text", "") for p in message["parts"] if p["type"] == "text")
            files = [block for p in message["parts"] if p["type"] == "attachment" for block in _attachment_blocks(p)]
            # The API refuses an empty text block: a message of files alone has none.
            messages.append({"role": "user", "content": ([{"type": "text", "text": text}] if text else []) + files})
            continue
        for texts, tools in steps_of(message["parts"]):
            content: list[dict[str, Any]] = [{"type": "text", "text": p["text"]} for p in texts]
            content += [
                {"type": "tool_use", "id": provider_call_id(p), "name": p["name"], "input": p["input"]} for p in tools
            ]
            messages.append({"role": "assistant", "content": content})
            if tools:
                results = [
                    {"type": "tool_result", "tool_use_id": provider_call_id(p), "content": json.dumps(tool_output(p))}
                    for p in tools
                ]
                messages.append({"role": "user", "content": results})
    return messages


def _attachment_blocks(part: dict[str, Any]) -> list[dict[str, Any]]:
    """An attachment as content blocks (attachments.content decided the way): its label, then the file."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": part["text"]}]
    if part.get("mode") == "image":
        source = {"type": "base64", "media_type": part["media_type"], "data": part["data"]}
        blocks.append({"type": "image", "source": source})
    elif part.get("mode") == "document":
        source = {"type": "base64", "media_type": "application/pdf", "data": part["data"]}
        blocks.append({"type": "document", "source": source, "title": part["name"]})
    return blocks


class AnthropicAdapter:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    async def stream(self, request: ModelRequest, *, model: str, key: Secret | None) -> AsyncIterator[StreamEvent]:
        if key is None:
            raise ProviderError("provider_key_missing", "Add an Anthropic API key in Settings to use this model.")
        kwargs: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens,
            "system": request.system,
            "messages": anthropic_messages(request),
            "stream": True,
        }
        if request.tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
            ]
            if not request.may_call_tools:
                kwargs["tool_choice"] = {"type": "none"}
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(anthropic_client(self.base_url, key))
            with sdk_errors(anthropic, LABEL):
                # The raw response: its events are read as JSON below, not as the SDK's
                # typed events (a pydantic model per delta, built on the engine loop that
                # every stream of the worker shares).
                answer = await stack.enter_async_context(client.messages.with_streaming_response.create(**kwargs))
            async for event in _events(anthropic.AsyncStream.raw_events(answer.http_response)):
                yield event


async def _events(sse: AsyncIterator[Any]) -> AsyncIterator[StreamEvent]:
    """The Messages API's stream events, as the engine's events (the SDK's `AsyncStream` rules)."""
    tool_blocks: dict[int, dict[str, str]] = {}
    stop_reason, input_tokens, output_tokens = "end_turn", 0, 0
    with sdk_errors(anthropic, LABEL, answering=True):
        async for message in sse:
            kind = message.event
            if kind is None or kind == "ping" or not message.data:
                continue
            event = json.loads(message.data)
            if kind == "error":
                raise _stream_error(event)
            if kind == "message_start":
                input_tokens = event["message"]["usage"].get("input_tokens") or 0
            elif kind == "content_block_start" and event["content_block"]["type"] == "tool_use":
                block = event["content_block"]
                tool_blocks[event["index"]] = {"id": block["id"], "name": block["name"], "json": ""}
            elif kind == "content_block_delta":
                delta = event["delta"]
                if delta["type"] == "text_delta" and delta["text"]:
                    yield TextDelta(delta["text"])
                elif delta["type"] == "input_json_delta" and event["index"] in tool_blocks:
                    tool_blocks[event["index"]]["json"] += delta["partial_json"]
            elif kind == "content_block_stop" and event["index"] in tool_blocks:
                block = tool_blocks.pop(event["index"])
                yield ToolCall("", block["name"], _tool_input(block["json"]), provider_id=block["id"])
            elif kind == "message_delta":
                stop_reason = event["delta"].get("stop_reason") or stop_reason
                output_tokens = (event.get("usage") or {}).get("output_tokens") or output_tokens
    yield StepFinished(stop_reason, input_tokens, output_tokens)


def _stream_error(body: Any) -> ProviderError:
    """An error Anthropic sent inside the stream (HTTP 200), by its type."""
    error = body.get("error") if isinstance(body, dict) else None
    error_type = error.get("type") if isinstance(error, dict) else None
    return provider_error_from_status(LABEL, _STREAM_ERROR_STATUS.get(error_type or ""))


def _tool_input(raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("tool input must be an object")
    return value
