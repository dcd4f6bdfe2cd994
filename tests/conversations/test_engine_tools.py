"""The turn engine's tool loop, in process, against the loopback providers.

Test-only tools are registered for each test and removed afterwards; the model asks for
them through the real wire formats, and their results must reach the next model request
in each provider's own format.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from conversations.eventlog import events_append
from conversations.models import Message, MessageRole, Turn
from conversations.providers.base import engine_call_id
from conversations.turns import turn_cancel, turn_claim
from tests.support.engine import (
    Provider,
    ask,
    assistant_parts,
    events,
    eventually,
    has_event,
    new_conversation,
    orm,
    run,
    sent,
    submit,
    text_of,
    tool_parts,
    tool_results_sent,
    turn_get,
    turn_is,
)
from tests.support.fake_providers import Call, Text
from tests.support.resources import free_port
from tools.activity import activity_begin, activity_running, activity_store
from tools.models import ToolActivity
from tools.registry import Effect, Tool, ToolContext, ToolFailed, tool_register, tool_unregister

pytestmark = pytest.mark.django_db(transaction=True)

FORECAST_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}
RENDEZVOUS_SCHEMA = {
    "type": "object",
    "properties": {"me": {"type": "string"}, "other": {"type": "string"}},
    "required": ["me", "other"],
}
EMPTY_SCHEMA = {"type": "object", "properties": {}}
# The fixture tools of this module and the tools the apps always register (memory, tasks, web, shell, browser tasks,
# attachments).
TOOL_NAMES = [
    "browser_read",
    "browser_task_propose",
    "create_task",
    "delete_task",
    "forget",
    "list_tasks",
    "long_job",
    "read_attachment",
    "read_page",
    "read_url",
    "recall",
    "remember",
    "rendezvous",
    "send_postcard",
    "shell",
    "update_memory",
    "update_task",
    "weather_forecast",
    "web_search",
]
INTERRUPTED = {"error": "interrupted", "message": "The tool call was interrupted; its outcome is unknown."}


@dataclass
class ToolBench:
    """What the test tools saw: every call's context and input, in order."""

    calls: list[tuple[ToolContext, dict[str, Any]]] = field(default_factory=list)
    arrived: dict[str, asyncio.Event] = field(default_factory=dict)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: list[str] = field(default_factory=list)


@pytest.fixture
def bench() -> Iterator[ToolBench]:
    bench = ToolBench()

    async def forecast(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        bench.calls.append((context, data))
        return {"city": data["city"], "forecast": "sunny, 24 °C"}

    async def rendezvous(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        # Each call waits for the other one: run one after the other, both would time out.
        bench.calls.append((context, data))
        bench.arrived.setdefault(data["me"], asyncio.Event()).set()
        other = bench.arrived.setdefault(data["other"], asyncio.Event())
        try:
            await asyncio.wait_for(other.wait(), 5)
        except TimeoutError:
            raise ToolFailed(f"{data['me']} waited alone") from None
        return {"met": data["other"]}

    async def read_page(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        bench.calls.append((context, data))
        raise ToolFailed("The page could not be read: the site answered 503.")

    async def long_job(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        bench.calls.append((context, data))
        try:
            await asyncio.wait_for(bench.release.wait(), 60)
        except asyncio.CancelledError:
            bench.cancelled.append(context.tool_call_id)
            raise
        return {"done": True}

    async def send_postcard(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        bench.calls.append((context, data))
        return {"sent_to": data["city"]}

    tools = [
        Tool("long_job", "A job that takes a while.", EMPTY_SCHEMA, long_job, deadline=30, effect=Effect.EFFECT),
        Tool(
            "weather_forecast",
            "Tomorrow's weather in a city.",
            FORECAST_SCHEMA,
            forecast,
            deadline=10,
            effect=Effect.READ,
            label="Forecast",
            summarize=lambda result: f"{result['city']}: {result['forecast']}",
        ),
        Tool("rendezvous", "Meet another call.", RENDEZVOUS_SCHEMA, rendezvous, deadline=10, effect=Effect.READ),
        Tool("read_page", "Read a web page.", EMPTY_SCHEMA, read_page, deadline=10, effect=Effect.READ),
        Tool("send_postcard", "Send a postcard.", FORECAST_SCHEMA, send_postcard, deadline=10, effect=Effect.EFFECT),
    ]
    for tool in tools:
        tool_register(tool)
    yield bench
    for tool in tools:
        tool_unregister(tool.name)


def contract(part: dict[str, Any]) -> dict[str, Any]:
    """The fields of a stored tool part that PROTOCOL.md promises, and its status."""
    return {k: part.get(k) for k in ("type", "tool_call_id", "name", "input", "output", "status")}


def exchange_sent(provider: Provider, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages after the first user message of a request, JSON strings decoded."""
    messages = [m for m in body["messages"] if m["role"] != "system"][1:]
    decoded = json.loads(json.dumps(messages))
    for message in decoded:
        if provider.name == "anthropic":
            for block in message["content"]:
                if block["type"] == "tool_result":
                    block["content"] = json.loads(block["content"])
        else:
            for call in message.get("tool_calls") or []:
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
            if message["role"] == "tool":
                message["content"] = json.loads(message["content"])
    return decoded


def expected_exchange(
    provider: Provider, text: str, calls: list[tuple[str, str, dict[str, Any]]], results: list[Any]
) -> list[dict[str, Any]]:
    """One step that asked for tools and their results, in the provider's wire format."""
    if provider.name == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": i, "name": n, "input": d} for i, n, d in calls]
        tool_results = [
            {"type": "tool_result", "tool_use_id": i, "content": r} for (i, _, _), r in zip(calls, results, strict=True)
        ]
        return [{"role": "assistant", "content": content}, {"role": "user", "content": tool_results}]
    tool_calls = [{"id": i, "type": "function", "function": {"name": n, "arguments": d}} for i, n, d in calls]
    answer = {"role": "assistant", "content": text or None, "tool_calls": tool_calls}
    return [answer] + [
        {"role": "tool", "tool_call_id": i, "content": r} for (i, _, _), r in zip(calls, results, strict=True)
    ]


async def test_it_runs_a_tool_and_sends_its_result_back_to_the_model(provider, bench, fake_providers, cancels):
    fake_providers.script(
        [Text("Let me check."), Call("call_wx1", "weather_forecast", {"city": "Porto"})],
        [Text("Tomorrow will be sunny in Porto.")],
    )
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Weather in Porto tomorrow?", cancels)

    assert turn.status == "completed"
    output = {"city": "Porto", "forecast": "sunny, 24 °C"}
    [(context, data)] = bench.calls
    assert data == {"city": "Porto"}
    call_id = engine_call_id(turn.id, 0, 0)
    assert (context.turn_id, context.conversation_id, context.tool_call_id) == (turn.id, conversation_id, call_id)
    first, second = fake_providers.requests
    assert sent(provider, first.body).tool_names == TOOL_NAMES
    assert exchange_sent(provider, second.body) == expected_exchange(
        provider, "Let me check.", [("call_wx1", "weather_forecast", {"city": "Porto"})], [output]
    )
    rows = await events(conversation_id)
    assert [e.kind for e in rows] == [
        "turn.queued",
        "turn.started",
        "text.delta",
        "tool.started",
        "activity.updated",
        "activity.updated",
        "tool.finished",
        "activity.updated",
        "text.delta",
        "turn.completed",
    ]
    assert rows[3].data == {"tool_call_id": call_id, "name": "weather_forecast", "input": {"city": "Porto"}}
    assert rows[6].data == {
        "tool_call_id": call_id,
        "name": "weather_forecast",
        "status": "succeeded",
        "output": output,
    }
    pending, started, finished = (rows[i].data["activity"] for i in (4, 5, 7))
    assert (pending["status"], pending["started_at"], pending["execution_count"]) == ("pending", None, 0)
    assert (started["status"], started["finished_at"], started["duration_ms"]) == ("running", None, None)
    assert started["execution_count"] == 1
    assert (finished["status"], finished["tool_call_id"], finished["label"]) == ("succeeded", call_id, "Forecast")
    assert finished["summary"] == "Porto: sunny, 24 °C"
    assert finished["id"] == started["id"]
    assert finished["duration_ms"] >= 0
    stored = await orm(lambda: ToolActivity.objects.get(turn_id=turn.id))()
    assert (stored.status, stored.summary, str(stored.id)) == ("succeeded", "Porto: sunny, 24 °C", finished["id"])
    parts = await assistant_parts(turn.id)
    assert [p["type"] for p in parts] == ["text", "tool", "text"]
    assert contract(parts[1]) == {
        "type": "tool",
        "tool_call_id": call_id,
        "name": "weather_forecast",
        "input": {"city": "Porto"},
        "output": output,
        "status": "succeeded",
    }
    assert parts[1]["provider_call_id"] == "call_wx1"  # kept only to answer the provider
    assert text_of(parts) == "Let me check.Tomorrow will be sunny in Porto."
    assert turn.steps == 2


async def test_it_runs_parallel_calls_together_and_returns_both_results(provider, bench, fake_providers, cancels):
    calls = [
        ("call_a", "rendezvous", {"me": "a", "other": "b"}),
        ("call_b", "rendezvous", {"me": "b", "other": "a"}),
    ]
    fake_providers.script([Call(*c) for c in calls], [Text("Both met.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Meet up.", cancels)

    assert turn.status == "completed"
    finished = {e.data["tool_call_id"]: e.data for e in await events(conversation_id) if e.kind == "tool.finished"}
    assert {k: (v["status"], v["output"]) for k, v in finished.items()} == {
        engine_call_id(turn.id, 0, 0): ("succeeded", {"met": "b"}),
        engine_call_id(turn.id, 0, 1): ("succeeded", {"met": "a"}),
    }
    assert exchange_sent(provider, fake_providers.requests[1].body) == expected_exchange(
        provider, "", calls, [{"met": "b"}, {"met": "a"}]
    )
    parts = tool_parts(await assistant_parts(turn.id))
    assert [contract(p)["status"] for p in parts] == ["succeeded", "succeeded"]
    assert [(p["tool_call_id"], p["provider_call_id"]) for p in parts] == [
        (engine_call_id(turn.id, 0, 0), "call_a"),
        (engine_call_id(turn.id, 0, 1), "call_b"),
    ]


async def test_it_answers_an_unknown_tool_with_an_error_and_goes_on(provider, bench, fake_providers, cancels):
    fake_providers.script([Call("call_x", "launch_rockets", {"count": 3})], [Text("I cannot do that.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Launch three rockets.", cancels)

    assert turn.status == "completed"
    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["status"], part["output"]["error"]) == ("failed", "unknown_tool")
    assert part["input"] == {"count": 3}
    results = tool_results_sent(provider, fake_providers.requests[1].body)
    assert results["call_x"]["error"] == "unknown_tool"
    finished = [e.data for e in await events(conversation_id) if e.kind == "tool.finished"]
    assert [(d["tool_call_id"], d["status"], d["output"]["error"]) for d in finished] == [
        (engine_call_id(turn.id, 0, 0), "failed", "unknown_tool")
    ]
    assert text_of(await assistant_parts(turn.id)) == "I cannot do that."
    assert bench.calls == []


async def test_it_reports_a_failing_tool_with_its_message(anthropic, bench, fake_providers, cancels):
    fake_providers.script([Call("call_p", "read_page", {})], [Text("The site is down.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Read the page.", cancels)

    assert turn.status == "completed"
    failure = {"error": "tool_failed", "message": "The page could not be read: the site answered 503."}
    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["status"], part["output"]) == ("failed", failure)
    [finished] = [e.data for e in await events(conversation_id) if e.kind == "tool.finished"]
    assert (finished["status"], finished["output"]) == ("failed", failure)
    assert tool_results_sent(anthropic, fake_providers.requests[1].body) == {"call_p": failure}


async def test_it_stops_a_model_that_keeps_calling_tools_after_8_steps(provider, bench, fake_providers, cancels):
    fake_providers.script(*[[Call(f"call_{i}", "weather_forecast", {"city": f"City {i}"})] for i in range(12)])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Forecast every city you know.", cancels)

    assert turn.status == "completed"
    assert turn.steps == 8
    requests = [sent(provider, r.body) for r in fake_providers.requests]
    assert len(requests) == 8
    assert all(r.tool_names == TOOL_NAMES for r in requests)
    assert all("tool_choice" not in r.body for r in fake_providers.requests[:7])
    # The last step still describes the tools (the transcript holds calls and results)
    # but forbids calling one, so the model has to answer in text.
    none = {"type": "none"} if provider.name == "anthropic" else "none"
    assert fake_providers.requests[7].body["tool_choice"] == none
    assert [d["city"] for _, d in bench.calls] == [f"City {i}" for i in range(7)]
    assert set(tool_results_sent(provider, fake_providers.requests[7].body)) == {f"call_{i}" for i in range(7)}


async def crash_during_call(conversation_id, text: str, name: str, data: dict[str, Any]) -> Turn:
    """Leave behind what a worker killed while a tool call ran leaves: a tool part without output,
    its running activity, and a lease that ran out."""
    turn = await submit(conversation_id, text)
    claim = await orm(turn_claim)(turn_id=turn.id)
    assert claim is not None
    crashed_parts = [
        {"type": "text", "text": "Checking.", "step": 0},
        {"type": "tool", "tool_call_id": "call_lost", "name": name, "input": data, "output": None, "step": 0},
    ]

    def crash() -> None:
        Message.objects.create(
            conversation_id=conversation_id,
            turn_id=turn.id,
            role=MessageRole.ASSISTANT,
            ordinal=2 * turn.ordinal + 1,
            parts=crashed_parts,
        )
        with transaction.atomic():
            lost = activity_begin(conversation_id=conversation_id, turn_id=turn.id, tool_call_id="call_lost", name=name)
            activity_running(lost)
            activity_store(lost)
            events_append(
                conversation_id=conversation_id,
                events=[("tool.started", turn.id, {"tool_call_id": "call_lost", "name": name})],
            )
        Turn.objects.filter(id=turn.id).update(steps=1, lease_expires_at=timezone.now() - timedelta(seconds=1))

    await orm(crash)()
    return turn


async def test_it_never_runs_an_effect_call_cut_off_by_a_crash_again(provider, bench, fake_providers, cancels):
    conversation_id = await new_conversation()
    turn = await crash_during_call(conversation_id, "Send a postcard to Faro.", "send_postcard", {"city": "Faro"})
    fake_providers.script([Text("I could not confirm the postcard to Faro was sent.")])

    await run(turn.id, cancels)

    finished = await turn_get(turn.id)
    assert finished.status == "completed"
    assert bench.calls == []  # the interrupted call is not run a second time
    parts = await assistant_parts(turn.id)
    assert contract(parts[1]) == {
        "type": "tool",
        "tool_call_id": "call_lost",
        "name": "send_postcard",
        "input": {"city": "Faro"},
        "output": INTERRUPTED,
        "status": "interrupted",
    }
    assert text_of(parts) == "Checking.I could not confirm the postcard to Faro was sent."
    [request] = fake_providers.requests
    assert tool_results_sent(provider, request.body) == {"call_lost": INTERRUPTED}
    rows = await events(conversation_id)
    assert [e.kind for e in rows] == [
        "turn.queued",
        "turn.started",
        "tool.started",
        "turn.started",
        "tool.finished",
        "activity.updated",
        "text.delta",
        "turn.completed",
    ]
    assert rows[3].data == {"attempt": 2}
    interrupted = rows[5].data["activity"]
    assert (interrupted["tool_call_id"], interrupted["status"]) == ("call_lost", "interrupted")
    assert "unknown" in interrupted["summary"]
    # A client that showed the call as running learns how it ended.
    assert rows[4].data == {
        "tool_call_id": "call_lost",
        "name": "send_postcard",
        "status": "interrupted",
        "output": INTERRUPTED,
    }


async def test_it_runs_a_read_call_cut_off_by_a_crash_again_on_the_same_card(provider, bench, fake_providers, cancels):
    conversation_id = await new_conversation()
    turn = await crash_during_call(conversation_id, "Weather in Faro?", "weather_forecast", {"city": "Faro"})
    before = await orm(lambda: ToolActivity.objects.get(turn_id=turn.id))()
    fake_providers.script([Text(" Sunny in Faro.")])

    await run(turn.id, cancels)

    assert (await turn_get(turn.id)).status == "completed"
    [(context, data)] = bench.calls
    assert (data, context.tool_call_id) == ({"city": "Faro"}, "call_lost")
    output = {"city": "Faro", "forecast": "sunny, 24 °C"}
    parts = await assistant_parts(turn.id)
    assert (parts[1]["status"], parts[1]["output"]) == ("succeeded", output)
    assert text_of(parts) == "Checking. Sunny in Faro."
    [request] = fake_providers.requests
    assert tool_results_sent(provider, request.body) == {"call_lost": output}
    after = await orm(lambda: ToolActivity.objects.get(turn_id=turn.id))()
    assert (after.id, after.status, after.execution_count) == (before.id, "succeeded", 2)
    assert (after.created_at, after.started_at) == (before.created_at, before.started_at)
    cards = [e.data["activity"] for e in await events(conversation_id) if e.kind == "activity.updated"]
    assert [c["status"] for c in cards] == ["interrupted", "pending", "running", "succeeded"]
    assert {c["id"] for c in cards} == {str(before.id)}
    # The card keeps when it was interrupted, through the run again and after it.
    interrupted_at = cards[0]["interrupted_at"]
    assert interrupted_at is not None
    assert [c["interrupted_at"] for c in cards] == [interrupted_at] * 4
    assert after.interrupted_at is not None


async def test_it_cancels_a_running_tool_that_would_run_for_a_minute(anthropic, bench, fake_providers, cancels):
    fake_providers.script([Text("Starting the job."), Call("call_job", "long_job", {})], [Text("Not asked.")])
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Run the long job.")
    running = asyncio.ensure_future(run(turn.id, cancels))
    try:
        await eventually(lambda: has_event(conversation_id, "tool.started"), timeout=30, what="the tool to start")
        await orm(turn_cancel)(conversation_id=conversation_id)
        await eventually(lambda: turn_is(turn.id, "cancelled"), timeout=20, what="the turn to be cancelled")
        await asyncio.wait_for(running, 20)
    finally:
        running.cancel()

    async def tool_stopped() -> list[str]:
        return bench.cancelled

    await eventually(tool_stopped, timeout=20, what="the tool to be cancelled")
    assert bench.cancelled == [engine_call_id(turn.id, 0, 0)]
    cancelled = {"error": "cancelled", "message": "The owner stopped this turn."}
    parts = await assistant_parts(turn.id)
    assert [(p["status"], p["output"]) for p in tool_parts(parts)] == [("cancelled", cancelled)]
    assert text_of(parts) == "Starting the job."
    rows = await events(conversation_id)
    assert [e.kind for e in rows][-3:] == ["tool.finished", "activity.updated", "turn.cancelled"]
    assert (rows[-3].data["status"], rows[-3].data["output"]) == ("cancelled", cancelled)
    assert rows[-2].data["activity"]["status"] == "cancelled"
    assert len(fake_providers.requests) == 1


async def test_it_stops_at_the_next_step_when_the_cancel_announcement_is_lost(
    anthropic, bench, fake_providers, cancels, settings
):
    fake_providers.script([Text("Starting the job."), Call("call_job", "long_job", {})], [Text("Not asked.")])
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Run the long job.")
    running = asyncio.ensure_future(run(turn.id, cancels))
    try:
        await eventually(lambda: has_event(conversation_id, "tool.started"), timeout=30, what="the tool to start")
        reachable = settings.REDIS_URL
        settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens: the announcement is lost
        await orm(turn_cancel)(conversation_id=conversation_id)
        settings.REDIS_URL = reachable
        bench.release.set()
        await asyncio.wait_for(running, 10)
    finally:
        running.cancel()

    stopped = await turn_get(turn.id)
    assert stopped.status == "cancelled"
    assert len(fake_providers.requests) == 1
    assert [p["status"] for p in tool_parts(await assistant_parts(turn.id))] == ["succeeded"]
    assert (await events(conversation_id))[-1].kind == "turn.cancelled"


async def test_it_stores_nul_characters_of_a_tool_call_and_its_result_as_replacement_characters(
    provider, bench, fake_providers, cancels
):
    fake_providers.script([Call("call_nul", "weather_forecast", {"city": "Por\x00to"})], [Text("Done.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Weather?", cancels)

    assert turn.status == "completed"
    [(_, data)] = bench.calls
    assert data == {"city": "Por\x00to"}  # the tool gets what the model sent
    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["input"] == {"city": "Por\ufffdto"}
    assert part["output"] == {"city": "Por\ufffdto", "forecast": "sunny, 24 °C"}
    finished = [e for e in await events(conversation_id) if e.kind == "tool.finished"]
    assert finished[0].data["output"]["city"] == "Por\ufffdto"
