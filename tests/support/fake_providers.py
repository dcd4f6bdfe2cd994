"""Loopback model providers that speak the real wire formats, for the real SDKs to talk to.

One asyncio HTTP/1.1 server (in its own thread) answers:
- `POST /v1/messages`: the Anthropic Messages API, streamed as server-sent events;
- `POST /v1/chat/completions` and `POST /local/v1/chat/completions`: OpenAI Chat
  Completions streaming (the `openai` and `local` providers);
- `POST /v1/responses`: the OpenAI Responses API as the web_search tool uses it (one JSON
  answer with a hosted web search call, citations and action sources), scripted apart
  with `FakeProviders.search(...)`.

Each test scripts the next answers with `FakeProviders.script(...)`: a list of steps
(text chunks, tool calls, HTTP errors, errors inside the stream, stalls, dropped
connections). Every request is recorded (path, headers, JSON body) for assertions.

A conversation's title request (its system prompt is `conversations.titles.TITLE_INSTRUCTIONS`)
is answered and recorded apart: `FakeProviders.titles(...)` scripts its answers, which
never take a turn's scripted answer, and it lands in `title_requests`, not `requests`.
Unscripted, it is answered 503 (overloaded), so a conversation keeps the name its first
message gave, as it does when the model cannot be asked.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from conversations.titles import TITLE_INSTRUCTIONS
from tests.support.resources import free_port


@dataclass
class Text:
    text: str
    delay: float = 0.0


@dataclass
class Call:
    id: str | None  # None: the chunk has no id at all (a server that sends none)
    name: str
    input: dict[str, Any]
    # Chat Completions only: the `index` its chunks carry; None for the next free one. Some
    # OpenAI-compatible servers give every call index 0.
    index: int | None = None


@dataclass
class HttpError:
    status: int
    body: dict[str, Any]


@dataclass
class StreamError:
    error_type: str  # Anthropic error type, e.g. overloaded_error


@dataclass
class Raw:
    """Server-sent event text sent as it is (for a malformed stream)."""

    text: str


@dataclass
class Stall:
    seconds: float


@dataclass
class Drop:
    """Close the connection in the middle of the stream."""


@dataclass
class Hold:
    """Send nothing more until the test calls `release()` (or `seconds` passed): a model still answering."""

    seconds: float = 30.0
    released: threading.Event = field(default_factory=threading.Event)

    def release(self) -> None:
        self.released.set()


Step = Text | Call | HttpError | StreamError | Raw | Stall | Drop | Hold


@dataclass
class Search:
    """A Responses API answer with one hosted web search call."""

    text: str = "A short synthesis of what the search found."
    citations: list[tuple[str, str]] = field(default_factory=list)  # (url, title) annotations
    # The search action's source URLs; None leaves the list out (the provider supplied none).
    sources: list[str] | None = field(default_factory=list)
    status: str = "completed"
    search_status: str = "completed"
    searched: bool = True
    incomplete_reason: str | None = None


@dataclass
class RawAnswer:
    """Exactly these bytes as the body (malformed or oversized answers)."""

    body: bytes
    status: int = 200
    content_type: str = "application/json"


@dataclass
class SlowAnswer:
    """Send the headers and the start of a body, then nothing for `seconds`."""

    seconds: float


SearchStep = Search | RawAnswer | SlowAnswer | HttpError


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    started: float
    ended: float | None = None
    disconnected: bool = False


@dataclass
class FakeProviders:
    port: int = field(default_factory=free_port)
    requests: list[Recorded] = field(default_factory=list)
    key_checks: list[Recorded] = field(default_factory=list)
    scripts: deque[list[Step]] = field(default_factory=deque)
    search_scripts: deque[SearchStep] = field(default_factory=deque)
    default_answer: list[Step] = field(default_factory=lambda: [Text("Hello"), Text(" from"), Text(" the fake model.")])
    # Title requests, apart from the turns' (see the module's docstring).
    title_requests: list[Recorded] = field(default_factory=list)
    title_scripts: deque[list[Step]] = field(default_factory=deque)
    # Called with (chunk text, time.monotonic()) as each text chunk is written (benchmarks).
    on_emit: Any = None
    # Keys the model listing (GET /v1/models, how a saved key is checked) answers 401 for.
    refused_keys: set[str] = field(default_factory=set)
    # Keys the model listing answers 503 for: the key cannot be checked.
    unavailable_keys: set[str] = field(default_factory=set)
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.AbstractServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def local_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/local/v1"

    def script(self, *answers: list[Step]) -> None:
        """Queue answers: each list is what one model request gets, in order."""
        with self._lock:
            self.scripts.extend(answers)

    def titles(self, *answers: list[Step] | str) -> None:
        """Queue answers of title requests, one per request (a title as text, or steps)."""
        with self._lock:
            self.title_scripts.extend([Text(answer)] if isinstance(answer, str) else answer for answer in answers)

    def search(self, *answers: SearchStep) -> None:
        """Queue answers of the Responses API, one per request (a default search otherwise)."""
        with self._lock:
            self.search_scripts.extend(answers)

    def reset(self) -> None:
        with self._lock:
            self.scripts.clear()
            self.search_scripts.clear()
            self.title_scripts.clear()
            self.requests.clear()
            self.title_requests.clear()
            self.key_checks.clear()
            self.refused_keys.clear()
            self.unavailable_keys.clear()

    def _next_answer(self, record: Recorded) -> list[Step]:
        with self._lock:
            if is_title_request(record.body):
                return self.title_scripts.popleft() if self.title_scripts else [TITLE_UNSCRIPTED]
            return self.scripts.popleft() if self.scripts else list(self.default_answer)

    def start(self) -> FakeProviders:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=512)
            )
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=serve, name="fake-providers", daemon=True).start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        # Only stop listening: the loop's thread is a daemon and ends with the process,
        # so streams still open do not complain about a closed loop.
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                record = Recorded(path, headers, json.loads(body or b"{}"), time.monotonic())
                with self._lock:
                    # Key checks (the model listing) and title requests apart: `requests` are
                    # what the model was asked in turns.
                    if path.startswith("/v1/models"):
                        self.key_checks.append(record)
                    else:
                        (self.title_requests if is_title_request(record.body) else self.requests).append(record)
                keep = await self._answer(method, path, record, writer)
                record.ended = time.monotonic()
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(self, method: str, path: str, record: Recorded, writer: asyncio.StreamWriter) -> bool:
        if method == "GET" and path.split("?", 1)[0] == "/v1/models":
            return await self._answer_models(record, writer)
        if method == "POST" and path == "/v1/responses":
            return await self._answer_search(record, writer)
        if method != "POST" or path not in ("/v1/messages", "/v1/chat/completions", "/local/v1/chat/completions"):
            await _respond(writer, 404, {"error": {"message": "not found"}})
            return True
        answer = self._next_answer(record)
        if answer and isinstance(answer[0], HttpError):
            await _respond(writer, answer[0].status, answer[0].body)
            return True
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        sse = AnthropicEvents() if path == "/v1/messages" else ChatEvents()
        try:
            await _send(writer, sse.start(record.body.get("model", "")))
            for step in answer:
                if isinstance(step, Text):
                    if step.delay:
                        await asyncio.sleep(step.delay)
                    await _send(writer, sse.text(step.text))
                    if self.on_emit is not None:
                        self.on_emit(step.text, time.monotonic())
                elif isinstance(step, Call):
                    await _send(writer, sse.call(step))
                elif isinstance(step, StreamError):
                    await _send(writer, sse.error(step.error_type))
                    await _end_chunks(writer)
                    return True
                elif isinstance(step, Raw):
                    await _send(writer, step.text)
                elif isinstance(step, Stall):
                    await asyncio.sleep(step.seconds)
                elif isinstance(step, Hold):
                    await asyncio.get_running_loop().run_in_executor(None, step.released.wait, step.seconds)
                elif isinstance(step, Drop):
                    record.disconnected = True
                    writer.transport.abort()
                    return False
            await _send(writer, sse.finish())
            await _end_chunks(writer)
        except ConnectionError:
            record.disconnected = True
            return False
        return True

    async def _answer_search(self, record: Recorded, writer: asyncio.StreamWriter) -> bool:
        with self._lock:
            answer = self.search_scripts.popleft() if self.search_scripts else Search()
        if isinstance(answer, HttpError):
            await _respond(writer, answer.status, answer.body)
            return True
        if isinstance(answer, SlowAnswer):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{")
            await writer.drain()
            try:
                for _ in range(int(answer.seconds * 10)):
                    await asyncio.sleep(0.1)
                    writer.write(b" ")
                    await writer.drain()
            except ConnectionError:
                pass
            record.disconnected = writer.transport.is_closing()
            return False
        if isinstance(answer, RawAnswer):
            body, status, content_type = answer.body, answer.status, answer.content_type
        else:
            body, status, content_type = (
                json.dumps(search_response(answer, record.body)).encode(),
                200,
                "application/json",
            )
        writer.write(
            f"HTTP/1.1 {status} OK\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        return True

    async def _answer_models(self, record: Recorded, writer: asyncio.StreamWriter) -> bool:
        """The model listing of either provider, for the key check: 401 for a refused key."""
        anthropic_key = record.headers.get("x-api-key")
        key = anthropic_key or record.headers.get("authorization", "").removeprefix("Bearer ")
        if key in self.refused_keys:
            if anthropic_key is not None:
                error = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
            else:
                error = {"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error"}}
            await _respond(writer, 401, error)
        elif key in self.unavailable_keys:
            await _respond(writer, 503, {"type": "error", "error": {"type": "api_error", "message": "down 4411"}})
        elif anthropic_key is not None:
            model = {
                "type": "model",
                "id": "claude-x",
                "display_name": "Claude X",
                "created_at": "2026-01-01T00:00:00Z",
            }
            await _respond(
                writer, 200, {"data": [model], "has_more": False, "first_id": "claude-x", "last_id": "claude-x"}
            )
        else:
            await _respond(
                writer,
                200,
                {"object": "list", "data": [{"id": "gpt-x", "object": "model", "created": 0, "owned_by": "x"}]},
            )
        return True


# What an unscripted title request gets: the model is overloaded.
TITLE_UNSCRIPTED = HttpError(503, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def system_prompt_of(body: dict[str, Any]) -> str:
    """The system prompt of a Messages or Chat Completions request body."""
    system = body.get("system")
    if isinstance(system, str):
        return system
    messages = body.get("messages") or []
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    return str(first.get("content", "")) if first.get("role") == "system" else ""


def is_title_request(body: dict[str, Any]) -> bool:
    """Whether a model request is a conversation's title request (by its system prompt)."""
    return system_prompt_of(body) == TITLE_INSTRUCTIONS


def search_response(answer: Search, request: dict[str, Any]) -> dict[str, Any]:
    """A Responses API `Response` object as the real API shapes it for a hosted web search."""
    output: list[dict[str, Any]] = []
    if answer.searched:
        action: dict[str, Any] = {
            "type": "search",
            "query": request.get("input", ""),
            "queries": [request.get("input", "")],
        }
        if answer.sources is not None:
            action["sources"] = [{"type": "url", "url": url} for url in answer.sources]
        output.append({"type": "web_search_call", "id": "ws_fake", "status": answer.search_status, "action": action})
    annotations = [
        {"type": "url_citation", "start_index": 0, "end_index": len(answer.text), "url": url, "title": title}
        for url, title in answer.citations
    ]
    content = [{"type": "output_text", "text": answer.text, "annotations": annotations, "logprobs": []}]
    output.append({"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant", "content": content})
    incomplete = {"reason": answer.incomplete_reason} if answer.incomplete_reason else None
    return {
        "id": "resp_fake",
        "object": "response",
        "created_at": 1767225600,
        "status": answer.status,
        "error": None,
        "incomplete_details": incomplete,
        "model": request.get("model", ""),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "store": request.get("store", True),
        "usage": {"input_tokens": 50, "output_tokens": 80, "total_tokens": 130},
    }


async def _respond(writer: asyncio.StreamWriter, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    writer.write(
        f"HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n".encode()
        + data
    )
    await writer.drain()


async def _send(writer: asyncio.StreamWriter, payload: str) -> None:
    if not payload:
        return
    data = payload.encode()
    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    await writer.drain()
    if writer.transport.is_closing():
        raise ConnectionError("client went away")


async def _end_chunks(writer: asyncio.StreamWriter) -> None:
    writer.write(b"0\r\n\r\n")
    await writer.drain()


def _sse(event: str | None, data: dict[str, Any] | str) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


class AnthropicEvents:
    def __init__(self) -> None:
        self.index = 0
        self.text_open = False
        self.stop_reason = "end_turn"

    def start(self, model: str) -> str:
        message: dict[str, Any] = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        }
        return _sse("message_start", {"type": "message_start", "message": message})

    def _close_text(self) -> str:
        if not self.text_open:
            return ""
        self.text_open = False
        self.index += 1
        return _sse("content_block_stop", {"type": "content_block_stop", "index": self.index - 1})

    def text(self, text: str) -> str:
        out = ""
        if not self.text_open:
            self.text_open = True
            block = {"type": "text", "text": ""}
            out += _sse(
                "content_block_start", {"type": "content_block_start", "index": self.index, "content_block": block}
            )
        delta = {"type": "text_delta", "text": text}
        return out + _sse("content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": delta})

    def call(self, call: Call) -> str:
        out = self._close_text()
        self.stop_reason = "tool_use"
        block: dict[str, Any] = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        raw = json.dumps(call.input)
        half = len(raw) // 2
        out += _sse("content_block_start", {"type": "content_block_start", "index": self.index, "content_block": block})
        for piece in (raw[:half], raw[half:]):
            delta = {"type": "input_json_delta", "partial_json": piece}
            out += _sse("content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": delta})
        out += _sse("content_block_stop", {"type": "content_block_stop", "index": self.index})
        self.index += 1
        return out

    def error(self, error_type: str) -> str:
        return _sse("error", {"type": "error", "error": {"type": error_type, "message": "Overloaded"}})

    def finish(self) -> str:
        out = self._close_text()
        delta = {"stop_reason": self.stop_reason, "stop_sequence": None}
        out += _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 20}})
        return out + _sse("message_stop", {"type": "message_stop"})


class ChatEvents:
    def __init__(self) -> None:
        self.calls = 0
        self.model = ""

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": self.model}
        return _sse(None, {**chunk, "choices": [choice]})

    def start(self, model: str) -> str:
        self.model = model
        return self._chunk({"role": "assistant", "content": ""})

    def text(self, text: str) -> str:
        return self._chunk({"content": text})

    def call(self, call: Call) -> str:
        index = self.calls if call.index is None else call.index
        self.calls += 1
        raw = json.dumps(call.input)
        half = len(raw) // 2
        first = {"index": index, "type": "function", "function": {"name": call.name, "arguments": ""}}
        if call.id is not None:
            first["id"] = call.id
        out = self._chunk({"tool_calls": [first]})
        for piece in (raw[:half], raw[half:]):
            out += self._chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        return out

    def error(self, error_type: str) -> str:
        return _sse(None, {"error": {"message": "The server had an error", "type": error_type}})

    def finish(self) -> str:
        out = self._chunk({}, "tool_calls" if self.calls else "stop")
        usage = {"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32}
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": self.model}
        out += _sse(None, {**chunk, "choices": [], "usage": usage})
        return out + _sse(None, "[DONE]")
