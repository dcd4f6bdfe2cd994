"""The provider adapters against loopback servers speaking the Anthropic and OpenAI wire formats."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import socket
import ssl
import traceback
from collections.abc import Callable

import anthropic as anthropic_sdk
import httpx2
import pytest

from conversations.providers import clients
from conversations.providers.anthropic_messages import AnthropicAdapter
from conversations.providers.base import (
    INTERRUPTED_OUTPUT,
    MAX_OUTPUT_TOKENS,
    Adapter,
    ModelRequest,
    StepFinished,
    TextDelta,
    ToolCall,
    ToolDefinition,
)
from conversations.providers.catalog import adapter_for
from conversations.providers.errors import ProviderError, connection_failure
from conversations.providers.openai_chat import ChatCompletionsAdapter
from flarebot.core.crypto import Secret
from tests.support.fake_providers import Call, Drop, FakeProviders, HttpError, Raw, StreamError, Text
from tests.support.resources import free_port
from tests.support.tls_server import untrusted_tls_server

ANTHROPIC_KEY = "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH3"
OPENAI_KEY = "sk-proj-Lm3Np5Qr7St9Uv1Wx3Yz5Ab7Cd9"
SYSTEM = "You are Flarebot, the owner's personal assistant."

WEATHER = ToolDefinition(
    name="weather",
    description="Look up the current weather in a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["metric", "imperial"]}},
        "required": ["city"],
    },
)
REMEMBER = ToolDefinition(
    name="remember",
    description="Store a fact about the owner.",
    input_schema={"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]},
)


def user(text: str) -> dict:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def ask(text: str = "Hello there", *, tools: list[ToolDefinition] | None = None) -> ModelRequest:
    return ModelRequest(system=SYSTEM, transcript=[user(text)], tools=tools or [])


def tool_part(call_id: str, name: str, input: dict, output: object, step: int) -> dict:
    return {"type": "tool", "tool_call_id": call_id, "name": name, "input": input, "output": output, "step": step}


# The owner asked; the assistant said something, called two tools at once (step 0), then
# one more (step 1) whose outcome is unknown (interrupted), answered (step 2); the owner asks again.
HISTORY = [
    user("Weather in Lisbon and Porto?"),
    {
        "role": "assistant",
        "parts": [
            {"type": "text", "text": "Let me check both.", "step": 0},
            tool_part("call_lis", "weather", {"city": "Lisbon"}, {"temp_c": 21}, 0),
            tool_part("call_opo", "weather", {"city": "Porto", "units": "metric"}, {"temp_c": 18}, 0),
            tool_part("call_mem", "remember", {"content": "Owner likes Portugal"}, None, 1),
            {"type": "text", "text": "Lisbon is 21 °C and Porto 18 °C.", "step": 2},
        ],
    },
    user("Thanks! And Faro?"),
]


def anthropic(server: FakeProviders) -> AnthropicAdapter:
    return AnthropicAdapter(server.anthropic_url)


def openai(server: FakeProviders) -> ChatCompletionsAdapter:
    return ChatCompletionsAdapter(
        base_url=server.openai_url, label="OpenAI", needs_key=True, max_tokens_field="max_completion_tokens"
    )


def local(server: FakeProviders) -> ChatCompletionsAdapter:
    return ChatCompletionsAdapter(
        base_url=server.local_url, label="The local model server", needs_key=False, max_tokens_field="max_tokens"
    )


ADAPTERS: dict[str, tuple[Callable[[FakeProviders], Adapter], str, str | None]] = {
    "anthropic": (anthropic, "claude-sonnet-5-5", ANTHROPIC_KEY),
    "openai": (openai, "gpt-6.2-sol", OPENAI_KEY),
    "local": (local, "llama3", None),
}
ALL = pytest.mark.parametrize("provider", list(ADAPTERS))
KEYED = pytest.mark.parametrize("provider", ["anthropic", "openai"])


def key_of(provider: str) -> Secret | None:
    key = ADAPTERS[provider][2]
    return Secret(key) if key else None


async def collect(adapter: Adapter, request: ModelRequest, *, model: str, key: Secret | None) -> list:
    return [event async for event in adapter.stream(request, model=model, key=key)]


async def run(server: FakeProviders, provider: str, request: ModelRequest) -> list:
    make, model, _ = ADAPTERS[provider]
    return await collect(make(server), request, model=model, key=key_of(provider))


async def failure(server: FakeProviders, provider: str) -> tuple[ProviderError, list]:
    """Run a request expected to fail; return the error and the events before it."""
    make, model, _ = ADAPTERS[provider]
    events: list = []

    async def consume() -> None:
        async for event in make(server).stream(ask(), model=model, key=key_of(provider)):
            events.append(event)

    with pytest.raises(ProviderError) as info:
        await consume()
    return info.value, events


def finish_reason(provider: str, *, tools: bool) -> str:
    if provider == "anthropic":
        return "tool_use" if tools else "end_turn"
    return "tool_calls" if tools else "stop"


# --- streaming ------------------------------------------------------------------------


@ALL
async def test_it_streams_text_deltas_in_order_and_ends_the_step(fake_providers, provider):
    fake_providers.script([Text("Hel"), Text("lo, "), Text("world"), Text(" ☀️")])

    events = await run(fake_providers, provider, ask())

    assert events == [
        TextDelta("Hel"),
        TextDelta("lo, "),
        TextDelta("world"),
        TextDelta(" ☀️"),
        StepFinished(finish_reason(provider, tools=False), 12, 20),
    ]


@ALL
async def test_it_returns_a_tool_call_with_its_parsed_input(fake_providers, provider):
    fake_providers.script([Text("Checking."), Call("call_1", "weather", {"city": "São Paulo", "units": "metric"})])

    events = await run(fake_providers, provider, ask(tools=[WEATHER]))

    assert events == [
        TextDelta("Checking."),
        ToolCall("", "weather", {"city": "São Paulo", "units": "metric"}, provider_id="call_1"),
        StepFinished(finish_reason(provider, tools=True), 12, 20),
    ]


@ALL
async def test_it_returns_parallel_tool_calls_in_order(fake_providers, provider):
    nested = {"content": 'Likes "quoted" things, {braces} and emoji 🎉', "tags": ["a", "b"], "n": 3}
    fake_providers.script(
        [
            Call("call_a", "weather", {"city": "Lisbon"}),
            Call("call_b", "remember", nested),
        ]
    )

    events = await run(fake_providers, provider, ask(tools=[WEATHER, REMEMBER]))

    assert events == [
        ToolCall("", "weather", {"city": "Lisbon"}, provider_id="call_a"),
        ToolCall("", "remember", nested, provider_id="call_b"),
        StepFinished(finish_reason(provider, tools=True), 12, 20),
    ]


@ALL
async def test_it_returns_a_tool_call_without_arguments_as_an_empty_input(fake_providers, provider):
    fake_providers.script([Call("call_1", "weather", {})])

    events = await run(fake_providers, provider, ask(tools=[WEATHER]))

    assert events[0] == ToolCall("", "weather", {}, provider_id="call_1")


# --- what is sent ---------------------------------------------------------------------


async def test_it_sends_an_anthropic_messages_request(fake_providers):
    await run(fake_providers, "anthropic", ask("What is the weather?", tools=[WEATHER, REMEMBER]))

    [sent] = fake_providers.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == ANTHROPIC_KEY
    assert "anthropic-version" in sent.headers
    assert "authorization" not in sent.headers
    body = sent.body
    assert body["model"] == "claude-sonnet-5-5"
    assert body["system"] == SYSTEM
    assert body["max_tokens"] == MAX_OUTPUT_TOKENS == 4096
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "What is the weather?"}]}]
    assert body["tools"] == [
        {"name": "weather", "description": WEATHER.description, "input_schema": WEATHER.input_schema},
        {"name": "remember", "description": REMEMBER.description, "input_schema": REMEMBER.input_schema},
    ]
    assert all(message["role"] != "system" for message in body["messages"])


@pytest.mark.parametrize(
    ("provider", "path", "field", "other_field"),
    [
        ("openai", "/v1/chat/completions", "max_completion_tokens", "max_tokens"),
        ("local", "/local/v1/chat/completions", "max_tokens", "max_completion_tokens"),
    ],
)
async def test_it_sends_a_chat_completions_request(fake_providers, provider, path, field, other_field):
    await run(fake_providers, provider, ask("What is the weather?", tools=[WEATHER]))

    [sent] = fake_providers.requests
    assert sent.path == path
    body = sent.body
    assert body["model"] == ADAPTERS[provider][1]
    assert body["stream"] is True
    assert body[field] == 4096
    assert other_field not in body
    assert body["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What is the weather?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "weather", "description": WEATHER.description, "parameters": WEATHER.input_schema},
        }
    ]
    assert "system" not in body


async def test_it_sends_the_openai_key_as_a_bearer_token(fake_providers):
    await run(fake_providers, "openai", ask())

    [sent] = fake_providers.requests
    assert sent.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert "x-api-key" not in sent.headers


async def test_it_sends_no_real_key_to_the_local_server(fake_providers):
    # Even handed a key by mistake, the local adapter does not pass it on.
    events = await collect(local(fake_providers), ask(), model="llama3", key=Secret(OPENAI_KEY))

    assert isinstance(events[-1], StepFinished)
    [sent] = fake_providers.requests
    assert OPENAI_KEY not in json.dumps(sent.headers)
    assert ANTHROPIC_KEY not in json.dumps(sent.headers)
    assert "x-api-key" not in sent.headers


@ALL
async def test_it_leaves_tools_out_when_none_are_offered(fake_providers, provider):
    await run(fake_providers, provider, ask())

    [sent] = fake_providers.requests
    assert "tools" not in sent.body


async def test_it_translates_a_transcript_with_tool_steps_for_anthropic(fake_providers):
    await run(fake_providers, "anthropic", ModelRequest(system=SYSTEM, transcript=HISTORY, tools=[WEATHER, REMEMBER]))

    messages = fake_providers.requests[0].body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    assert messages[0] == {"role": "user", "content": [{"type": "text", "text": "Weather in Lisbon and Porto?"}]}
    assert messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check both."},
            {"type": "tool_use", "id": "call_lis", "name": "weather", "input": {"city": "Lisbon"}},
            {"type": "tool_use", "id": "call_opo", "name": "weather", "input": {"city": "Porto", "units": "metric"}},
        ],
    }
    results = messages[2]["content"]
    assert [(r["type"], r["tool_use_id"]) for r in results] == [
        ("tool_result", "call_lis"),
        ("tool_result", "call_opo"),
    ]
    assert [json.loads(r["content"]) for r in results] == [{"temp_c": 21}, {"temp_c": 18}]
    assert messages[3] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "call_mem", "name": "remember", "input": {"content": "Owner likes Portugal"}}
        ],
    }
    [interrupted] = messages[4]["content"]
    assert interrupted["type"] == "tool_result"
    assert interrupted["tool_use_id"] == "call_mem"
    assert json.loads(interrupted["content"]) == INTERRUPTED_OUTPUT
    assert messages[5] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Lisbon is 21 °C and Porto 18 °C."}],
    }
    assert messages[6] == {"role": "user", "content": [{"type": "text", "text": "Thanks! And Faro?"}]}


@pytest.mark.parametrize("provider", ["openai", "local"])
async def test_it_translates_a_transcript_with_tool_steps_for_chat_completions(fake_providers, provider):
    await run(fake_providers, provider, ModelRequest(system=SYSTEM, transcript=HISTORY, tools=[WEATHER, REMEMBER]))

    messages = fake_providers.requests[0].body["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert messages[1] == {"role": "user", "content": "Weather in Lisbon and Porto?"}
    first = messages[2]
    assert first["content"] == "Let me check both."
    assert [(c["id"], c["type"], c["function"]["name"]) for c in first["tool_calls"]] == [
        ("call_lis", "function", "weather"),
        ("call_opo", "function", "weather"),
    ]
    assert [json.loads(c["function"]["arguments"]) for c in first["tool_calls"]] == [
        {"city": "Lisbon"},
        {"city": "Porto", "units": "metric"},
    ]
    assert [(m["tool_call_id"], json.loads(m["content"])) for m in messages[3:5]] == [
        ("call_lis", {"temp_c": 21}),
        ("call_opo", {"temp_c": 18}),
    ]
    second = messages[5]
    assert not second.get("content")
    assert [c["id"] for c in second["tool_calls"]] == ["call_mem"]
    assert messages[6]["tool_call_id"] == "call_mem"
    assert json.loads(messages[6]["content"]) == INTERRUPTED_OUTPUT
    assert messages[7]["content"] == "Lisbon is 21 °C and Porto 18 °C."
    assert not messages[7].get("tool_calls")
    assert messages[8] == {"role": "user", "content": "Thanks! And Faro?"}


# Parts stored before steps were numbered: text after tool calls starts a new step.
LEGACY_HISTORY = [
    user("Weather in Lisbon?"),
    {
        "role": "assistant",
        "parts": [
            {"type": "tool", "tool_call_id": "call_lis", "name": "weather", "input": {"city": "Lisbon"}, "output": 21},
            {"type": "text", "text": "It is 21 °C."},
        ],
    },
    user("Thanks!"),
]


@pytest.mark.parametrize(
    ("provider", "roles"),
    [
        ("anthropic", ["user", "assistant", "user", "assistant", "user"]),
        ("openai", ["system", "user", "assistant", "tool", "assistant", "user"]),
    ],
)
async def test_it_splits_unnumbered_parts_into_steps(fake_providers, provider, roles):
    await run(fake_providers, provider, ModelRequest(system=SYSTEM, transcript=LEGACY_HISTORY, tools=[WEATHER]))

    messages = fake_providers.requests[0].body["messages"]
    assert [m["role"] for m in messages] == roles
    answer = messages[-2]
    text = answer["content"] if provider == "openai" else answer["content"][0]["text"]
    assert text == "It is 21 °C."


@pytest.mark.parametrize("provider", ["anthropic", "openai", "local"])
async def test_it_reaches_the_configured_endpoint_through_the_catalog(fake_providers, settings, provider):
    settings.CONFIG = dataclasses.replace(
        settings.CONFIG, local_base_url=fake_providers.local_url, local_models=("llama3",)
    )
    model = ADAPTERS[provider][1]

    events = await collect(adapter_for(provider), ask(), model=model, key=key_of(provider))

    assert isinstance(events[-1], StepFinished)
    [sent] = fake_providers.requests
    assert sent.body["model"] == model
    assert (
        sent.path
        == {
            "anthropic": "/v1/messages",
            "openai": "/v1/chat/completions",
            "local": "/local/v1/chat/completions",
        }[provider]
    )


def test_it_offers_no_local_adapter_when_the_operator_configured_none(settings):
    settings.CONFIG = dataclasses.replace(settings.CONFIG, local_base_url=None, local_models=())

    with pytest.raises(LookupError):
        adapter_for("local")


# --- failures -------------------------------------------------------------------------


def assert_safe(error: ProviderError, *secrets: str) -> None:
    """The error shows nothing of the key or the upstream body, however it is printed."""
    printed = [str(error), error.message, repr(error), "".join(traceback.format_exception(error))]
    for text in printed:
        for secret in secrets:
            assert secret not in text


def anthropic_error(status: int, error_type: str, message: str) -> HttpError:
    return HttpError(status, {"type": "error", "error": {"type": error_type, "message": message}})


def openai_error(status: int, error_type: str, message: str, code: str | None = None) -> HttpError:
    return HttpError(status, {"error": {"message": message, "type": error_type, "param": None, "code": code}})


ECHOING_401 = {
    "anthropic": anthropic_error(401, "authentication_error", f"invalid x-api-key: {ANTHROPIC_KEY}"),
    "openai": openai_error(
        401, "invalid_request_error", f"Incorrect API key provided: {OPENAI_KEY}.", code="invalid_api_key"
    ),
}


@KEYED
async def test_it_reports_a_rejected_key_without_echoing_it(fake_providers, provider):
    fake_providers.script([ECHOING_401[provider]])
    key = ADAPTERS[provider][2]

    error, events = await failure(fake_providers, provider)

    assert events == []
    assert error.code == "provider_auth"
    assert error.retryable is False
    assert "Settings" in error.message
    assert_safe(error, key, key[-10:], "Incorrect API key", "invalid x-api-key")


@pytest.mark.parametrize(
    ("provider", "answer"),
    [
        ("anthropic", anthropic_error(429, "rate_limit_error", "Number of request tokens has exceeded your limit")),
        ("openai", openai_error(429, "requests", "Rate limit reached for gpt-6.2-sol", code="rate_limit_exceeded")),
        ("local", openai_error(429, "requests", "Too many requests")),
    ],
)
async def test_it_reports_rate_limiting(fake_providers, provider, answer):
    fake_providers.script([answer])

    error, _ = await failure(fake_providers, provider)

    assert error.code == "provider_rate_limited"
    assert_safe(error, "Number of request tokens", "Rate limit reached", "Too many requests")


@pytest.mark.parametrize(
    ("provider", "answer"),
    [
        ("anthropic", anthropic_error(529, "overloaded_error", "Overloaded upstream-detail-7731")),
        ("anthropic", anthropic_error(500, "api_error", "Internal server error upstream-detail-7731")),
        ("anthropic", anthropic_error(503, "api_error", "Unavailable upstream-detail-7731")),
        ("openai", openai_error(500, "server_error", "The server had an error upstream-detail-7731")),
        ("openai", openai_error(503, "server_error", "Service unavailable upstream-detail-7731")),
        ("local", openai_error(500, "server_error", "model crashed upstream-detail-7731")),
    ],
)
async def test_it_reports_an_unavailable_provider(fake_providers, provider, answer):
    fake_providers.script([answer])

    error, _ = await failure(fake_providers, provider)

    assert error.code == "provider_unavailable"
    assert_safe(error, "upstream-detail-7731")


async def test_it_reports_an_overload_inside_the_stream_as_unavailable(fake_providers):
    fake_providers.script([Text("Partial "), StreamError("overloaded_error")])

    error, events = await failure(fake_providers, "anthropic")

    assert events == [TextDelta("Partial ")]
    assert error.code == "provider_unavailable"
    assert "Anthropic" in error.message
    assert_safe(error, "Overloaded")


@pytest.mark.parametrize(
    ("error_type", "code"),
    [
        ("rate_limit_error", "provider_rate_limited"),
        ("authentication_error", "provider_auth"),
        ("api_error", "provider_unavailable"),
    ],
)
async def test_it_maps_anthropic_errors_inside_the_stream(fake_providers, error_type, code):
    fake_providers.script([StreamError(error_type)])

    error, _ = await failure(fake_providers, "anthropic")

    assert error.code == code


async def test_it_passes_over_pings_and_events_it_does_not_know_in_an_anthropic_stream(fake_providers):
    fake_providers.script(
        [
            Text("Hel"),
            Raw('event: ping\ndata: {"type": "ping"}\n\n'),
            Raw('event: thinking_summary\ndata: {"type": "thinking_summary", "text": "hidden"}\n\n'),
            Raw(": a comment line\n\n"),
            Text("lo"),
        ]
    )

    events = await run(fake_providers, "anthropic", ask())

    assert events == [TextDelta("Hel"), TextDelta("lo"), StepFinished("end_turn", 12, 20)]


@pytest.mark.parametrize(
    "event",
    [
        'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_de',
        'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0}',
        "event: content_block_delta\ndata: [1, 2]",
        'event: message_start\ndata: {"type": "message_start", "message": "secret-detail-5521"}',
    ],
    ids=["cut-off JSON", "no delta", "not an object", "message not an object"],
)
async def test_it_reports_an_anthropic_stream_it_cannot_read_safely(fake_providers, event):
    fake_providers.script([Text("Partial "), Raw(event + "\n\n")])

    error, events = await failure(fake_providers, "anthropic")

    assert events == [TextDelta("Partial ")]
    assert error.code == "provider_malformed"
    assert error.message == "Anthropic sent a response Flarebot could not read."
    assert_safe(error, "secret-detail-5521")


@pytest.mark.parametrize("provider", ["openai", "local"])
async def test_it_reports_an_error_inside_a_chat_completions_stream_safely(fake_providers, provider):
    fake_providers.script([Text("Partial "), StreamError("server_error")])

    error, events = await failure(fake_providers, provider)

    assert events == [TextDelta("Partial ")]
    assert error.message
    assert_safe(error, "The server had an error")


@ALL
async def test_it_reports_a_dropped_connection_as_retryable(fake_providers, provider):
    fake_providers.script([Text("Half an ans"), Drop()])

    error, events = await failure(fake_providers, provider)

    assert events == [TextDelta("Half an ans")]
    assert error.code == "provider_connection"
    assert error.retryable is True
    assert fake_providers.requests[0].disconnected is True


@ALL
async def test_it_says_a_connection_was_refused_and_that_it_may_be_retried(fake_providers, provider):
    make, model, _ = ADAPTERS[provider]
    adapter = make(fake_providers)
    adapter.base_url = adapter.base_url.replace(f":{fake_providers.port}", f":{free_port()}")

    with pytest.raises(ProviderError) as info:
        await collect(adapter, ask(), model=model, key=key_of(provider))

    assert info.value.code == "provider_refused"
    assert "refused the connection" in info.value.message
    assert info.value.retryable is True


@pytest.fixture
async def tls_server():
    async with untrusted_tls_server() as origin:
        yield origin


@ALL
async def test_it_says_the_tls_certificate_was_not_accepted(fake_providers, provider, tls_server):
    make, model, _ = ADAPTERS[provider]
    adapter = make(fake_providers)
    adapter.base_url = adapter.base_url.replace(f"http://127.0.0.1:{fake_providers.port}", tls_server)

    with pytest.raises(ProviderError) as info:
        await collect(adapter, ask(), model=model, key=key_of(provider))

    assert info.value.code == "provider_tls"
    assert "certificate" in info.value.message
    assert info.value.retryable is False


@KEYED
async def test_it_says_a_key_without_permission_is_refused_access(fake_providers, provider):
    fake_providers.script([HttpError(403, {"error": {"type": "permission_error", "message": "no access 9912"}})])

    error, _ = await failure(fake_providers, provider)

    assert error.code == "provider_forbidden"
    assert "HTTP 403" in error.message
    assert_safe(error, "no access 9912")


def chained(*errors: BaseException) -> BaseException:
    for outer, inner in itertools.pairwise(errors):
        outer.__cause__ = inner
    return errors[0]


@pytest.mark.parametrize(
    ("cause", "code"),
    [
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "provider_dns"),
        (ConnectionRefusedError(111, "Connection refused"), "provider_refused"),
        (ssl.SSLCertVerificationError("certificate verify failed"), "provider_tls"),
        (TimeoutError(), "provider_timeout"),
        (OSError(101, "Network is unreachable"), "provider_unreachable"),
    ],
)
def test_each_failure_to_connect_has_its_own_message(cause, code):
    request = httpx2.Request("POST", "https://api.example.invalid/v1/messages")
    error = chained(anthropic_sdk.APIConnectionError(request=request), httpx2.ConnectError("failed"), cause)

    failed = connection_failure("Anthropic", error, answering=False)
    lost = connection_failure("Anthropic", error, answering=True)

    assert failed.code == code
    assert lost.code == "provider_connection"
    assert len({failed.message, lost.message}) == 2


@pytest.mark.parametrize(("provider", "label"), [("anthropic", "Anthropic"), ("openai", "OpenAI")])
async def test_it_refuses_to_call_a_keyed_provider_without_a_key(fake_providers, provider, label):
    make, model, _ = ADAPTERS[provider]

    with pytest.raises(ProviderError) as info:
        await collect(make(fake_providers), ask(), model=model, key=None)

    assert info.value.code == "provider_key_missing"
    assert label in info.value.message
    assert "Settings" in info.value.message
    assert fake_providers.requests == []


async def test_it_recovers_after_a_failure(fake_providers):
    fake_providers.script([anthropic_error(529, "overloaded_error", "Overloaded")], [Text("Back again.")])

    error, _ = await failure(fake_providers, "anthropic")
    events = await run(fake_providers, "anthropic", ask())

    assert error.code == "provider_unavailable"
    assert events[0] == TextDelta("Back again.")
    assert len(fake_providers.requests) == 2


# --- the clients' lifetime --------------------------------------------------------------


async def test_a_client_pushed_out_of_the_cache_mid_stream_is_closed_when_its_stream_ends(fake_providers):
    fake_providers.script([Text("Still "), Text("streaming.", delay=0.3)])
    key = Secret(ANTHROPIC_KEY)
    adapter = anthropic(fake_providers)
    stream = adapter.stream(ask(), model="claude-sonnet-5-5", key=key)
    first = await anext(stream)  # the request is under way on the key's client
    async with clients.anthropic_client(fake_providers.anthropic_url, key) as streaming:
        pass
    # Sixteen other keys' streams push the streaming client out of the cache.
    others = []
    for n in range(clients._MAX_CLIENTS):
        async with clients.anthropic_client(fake_providers.anthropic_url, Secret(f"sk-ant-other-{n}")) as other:
            others.append(other)
    await asyncio.sleep(0.05)

    assert not streaming.is_closed()  # its stream goes on
    rest = [event async for event in stream]
    await asyncio.sleep(0.05)

    assert [first, *rest[:1]] == [TextDelta("Still "), TextDelta("streaming.")]
    assert streaming.is_closed()
    assert not any(other.is_closed() for other in others)  # the sixteen cached ones stay open
    await clients.clients_close()
    assert all(other.is_closed() for other in others)


async def test_a_client_pushed_out_of_the_cache_while_unused_is_closed_at_once(fake_providers):
    async with clients.openai_client(fake_providers.openai_url, Secret(OPENAI_KEY)) as oldest:
        pass
    for n in range(clients._MAX_CLIENTS):
        async with clients.openai_client(fake_providers.openai_url, Secret(f"sk-proj-other-{n}")):
            pass
    await asyncio.sleep(0.05)

    assert oldest.is_closed()
    await clients.clients_close()


async def test_a_key_reuses_its_client_while_another_key_gets_its_own(fake_providers):
    async with clients.openai_client(fake_providers.openai_url, Secret(OPENAI_KEY)) as first:
        pass
    async with clients.openai_client(fake_providers.openai_url, Secret(OPENAI_KEY)) as again:
        pass
    async with clients.openai_client(fake_providers.openai_url, Secret("sk-proj-replaced")) as replaced:
        pass

    assert again is first
    assert replaced is not first
    await clients.clients_close()
