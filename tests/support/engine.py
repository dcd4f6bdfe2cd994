"""Helpers for running the turn engine in process against the loopback providers.

Every ORM call goes through `channels.db.database_sync_to_async`, which closes the
connection of its thread afterwards, so the test database can be dropped at the end.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.db import transaction

from conversations.cancel_bus import CancelListener
from conversations.engine.runner import run_turn
from conversations.eventlog import events_append
from conversations.model_settings import model_configuration_set, provider_key_set
from conversations.models import Event, Message, MessageRole, Turn
from conversations.providers.catalog import ANTHROPIC_MODELS, OPENAI_MODELS
from conversations.providers.clients import clients_close
from conversations.services import conversation_create
from conversations.turns import turn_submit
from tests.support.fake_providers import FakeProviders

T = TypeVar("T")

ANTHROPIC_KEY = "sk-ant-api03-Qw7eRt9yUi1oPa3sDf5gHj7k"
OPENAI_KEY = "sk-proj-Zx2cVb4nMq6wEr8tYu0iOp2a"
PROVIDERS = ("anthropic", "openai", "local")
LOCAL_MODEL = "llama3"


@dataclass(frozen=True)
class Provider:
    name: str
    model: str
    path: str  # where the loopback server receives this provider's requests
    key: str | None


def provider_use(name: str, *, settings: Any, fake_providers: FakeProviders) -> Provider:
    """Make `name` the provider of the next turns (synchronous: call from a fixture)."""
    if name == "anthropic":
        provider_key_set(provider="anthropic", key=ANTHROPIC_KEY)
        return Provider("anthropic", ANTHROPIC_MODELS[0], "/v1/messages", ANTHROPIC_KEY)
    if name == "openai":
        model_configuration_set(provider="openai", model=OPENAI_MODELS[0])
        provider_key_set(provider="openai", key=OPENAI_KEY)
        return Provider("openai", OPENAI_MODELS[0], "/v1/chat/completions", OPENAI_KEY)
    settings.CONFIG = dataclasses.replace(
        settings.CONFIG, local_base_url=fake_providers.local_url, local_models=(LOCAL_MODEL,)
    )
    return Provider("local", LOCAL_MODEL, "/local/v1/chat/completions", None)


def orm(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    return database_sync_to_async(function)


async def new_conversation() -> uuid.UUID:
    conversation = await orm(conversation_create)()
    return conversation.id


async def submit(conversation_id: uuid.UUID, text: str, request_id: uuid.UUID | None = None) -> Turn:
    turn, _ = await orm(turn_submit)(conversation_id=conversation_id, request_id=request_id or uuid.uuid4(), text=text)
    return turn


async def run(turn_id: uuid.UUID, cancels: CancelListener, *, timeout: float = 30.0) -> None:
    """Run a turn to its end; a hang is a failure, not a stuck test run."""
    await asyncio.wait_for(run_turn(turn_id, cancels=cancels), timeout)


async def ask(conversation_id: uuid.UUID, text: str, cancels: CancelListener) -> Turn:
    """Submit a message, run its turn, and return the finished turn."""
    turn = await submit(conversation_id, text)
    await run(turn.id, cancels)
    return await turn_get(turn.id)


async def turn_get(turn_id: uuid.UUID) -> Turn:
    return await orm(Turn.objects.get)(id=turn_id)


async def events(conversation_id: uuid.UUID) -> list[Event]:
    return await orm(lambda: list(Event.objects.filter(conversation_id=conversation_id).order_by("sequence")))()


async def kinds(conversation_id: uuid.UUID, turn_id: uuid.UUID | None = None) -> list[str]:
    return [e.kind for e in await events(conversation_id) if turn_id is None or e.turn_id == turn_id]


async def turn_is(turn_id: uuid.UUID, status: str) -> bool:
    return (await turn_get(turn_id)).status == status


async def has_event(conversation_id: uuid.UUID, kind: str) -> bool:
    return kind in await kinds(conversation_id)


async def assistant_parts(turn_id: uuid.UUID) -> list[dict[str, Any]]:
    message = await orm(Message.objects.filter(turn_id=turn_id, role=MessageRole.ASSISTANT).first)()
    return message.parts if message is not None else []


def text_of(parts: list[dict[str, Any]]) -> str:
    return "".join(p["text"] for p in parts if p["type"] == "text")


async def assistant_text(turn_id: uuid.UUID) -> str:
    return text_of(await assistant_parts(turn_id))


def tool_parts(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in parts if p["type"] == "tool"]


async def eventually(check: Callable[[], Awaitable[T]], *, timeout: float, what: str) -> T:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


async def engine_cleanup(cancels: CancelListener) -> None:
    """Stop the cancel listener and close the SDK clients cached for this test's loop.

    Each test has its own event loop; a cached client holds connections of that loop and
    must not outlive it.
    """
    await cancels.close()
    await clients_close()


@dataclass(frozen=True)
class Sent:
    """One recorded model request, read the same way whatever the provider."""

    system: str
    max_tokens: int | None
    transcript: list[tuple[str, str]]  # (role, text) of user and assistant messages, in order
    tool_names: list[str] | None  # None when the request offered no tools


def sent(provider: Provider, body: dict[str, Any]) -> Sent:
    if provider.name == "anthropic":
        transcript = []
        for message in body["messages"]:
            texts = [b["text"] for b in message["content"] if b["type"] == "text"]
            if texts:
                transcript.append((message["role"], "".join(texts)))
        tools = [t["name"] for t in body["tools"]] if "tools" in body else None
        return Sent(body["system"], body.get("max_tokens"), transcript, tools)
    system = [m["content"] for m in body["messages"] if m["role"] == "system"]
    assert len(system) == 1
    assert body["messages"][0]["role"] == "system"
    transcript = [
        (m["role"], m["content"]) for m in body["messages"] if m["role"] in ("user", "assistant") and m.get("content")
    ]
    field = "max_completion_tokens" if provider.name == "openai" else "max_tokens"
    tools = [t["function"]["name"] for t in body["tools"]] if "tools" in body else None
    return Sent(system[0], body.get(field), transcript, tools)


def tool_results_sent(provider: Provider, body: dict[str, Any]) -> dict[str, Any]:
    """Return the tool results a request carries, by tool call id, decoded."""
    results: dict[str, Any] = {}
    for message in body["messages"]:
        if provider.name == "anthropic":
            if isinstance(message["content"], list):
                for block in message["content"]:
                    if block["type"] == "tool_result":
                        results[block["tool_use_id"]] = json.loads(block["content"])
        elif message["role"] == "tool":
            results[message["tool_call_id"]] = json.loads(message["content"])
    return results


def append_events_by_hand(conversation_id: uuid.UUID, turn_id: uuid.UUID, count: int) -> None:
    """Append `count` text deltas through the event log, as a long answer would."""
    with transaction.atomic():
        events_append(
            conversation_id=conversation_id,
            events=[("text.delta", turn_id, {"text": f"w{i} "}) for i in range(count)],
        )
