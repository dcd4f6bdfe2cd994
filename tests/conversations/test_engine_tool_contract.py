"""The tool contract as the engine enforces it, each clause at its edge, in process.

Every test registers its own tools (fixture-only, removed afterwards) and talks to the
real SDKs through the loopback providers; what a user would notice is checked: the
answer's tool parts, the activity cards, the events, and what the model is sent.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from conversations.engine import runner
from conversations.model_settings import provider_key_set
from conversations.models import Conversation, Turn
from conversations.providers.base import engine_call_id
from conversations.services import conversation_delete, conversation_teardown
from conversations.turns import LEASE, turn_claim
from flarebot.core.crypto import Secret
from flarebot.core.database import db
from tests.support.engine import (
    OPENAI_KEY,
    ask,
    assistant_parts,
    events,
    eventually,
    has_event,
    new_conversation,
    orm,
    run,
    submit,
    tool_parts,
    tool_results_sent,
    turn_get,
    turn_is,
)
from tests.support.fake_providers import Call, Text
from tools import registry
from tools.models import ToolActivity, ToolSlot
from tools.output import json_size
from tools.registry import CleanupRequest, Effect, Tool, ToolContext, tool_register, tool_unregister
from tools.runtime import CallWatch
from tools.slots import slot_release

pytestmark = pytest.mark.django_db(transaction=True)

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}}, "required": ["city"]}
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.fixture
def register() -> Iterator[Any]:
    names: list[str] = []

    def add(tool: Tool) -> Tool:
        tool_register(tool)
        names.append(tool.name)
        return tool

    yield add
    for name in names:
        tool_unregister(name)


def tool(name: str, run_: Any, *, schema: dict[str, Any] = EMPTY, **declared: Any) -> Tool:
    declared.setdefault("deadline", 10)
    declared.setdefault("effect", Effect.READ)
    return Tool(name, f"The {name} tool.", schema, run_, **declared)


async def cards(conversation_id) -> list[dict[str, Any]]:
    return [e.data["activity"] for e in await events(conversation_id) if e.kind == "activity.updated"]


async def final_card(turn_id, tool_call_id: str) -> ToolActivity:
    return await orm(ToolActivity.objects.get)(turn_id=turn_id, tool_call_id=tool_call_id)


async def test_it_answers_invalid_input_to_the_model_and_never_runs_the_tool(
    anthropic, register, fake_providers, cancels
):
    seen: list[Any] = []

    async def forecast(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        seen.append(data)
        return {"forecast": "rain"}

    register(tool("forecast", forecast, schema=CITY))
    fake_providers.script([Call("c1", "forecast", {"city": 42})], [Text("Let me fix that.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Weather?", cancels)

    assert turn.status == "completed"
    assert seen == []
    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["status"] == "failed"
    assert part["output"]["error"] == "invalid_input"
    message = part["output"]["message"]
    assert "42 is not of type 'string'" in message
    assert "$.city" in message
    assert len(message) <= 500
    assert tool_results_sent(anthropic, fake_providers.requests[1].body)["c1"] == part["output"]
    card = await final_card(turn.id, engine_call_id(turn.id, 0, 0))
    assert (card.status, card.execution_count, card.started_at) == ("failed", 0, None)
    # The card never quotes what the model sent; the model gets the details.
    assert card.summary == "forecast was given input it does not accept; the model was told why."


async def test_it_bounds_an_invalid_input_message_to_500_characters(anthropic, register, fake_providers, cancels):
    register(tool("forecast", _never_called, schema=CITY))
    fake_providers.script([Call("c1", "forecast", {"city": "x" * 5000})], [Text("Shorter, then.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Weather?", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["output"]["error"] == "invalid_input"
    assert len(part["output"]["message"]) == 500


async def _never_called(context: ToolContext, data: dict[str, Any]) -> None:
    raise AssertionError("the tool must not run")


async def test_it_stops_a_call_at_its_deadline_runs_its_cleanup_and_goes_on(
    anthropic, register, fake_providers, cancels
):
    cleaned: list[CleanupRequest] = []
    stopped: list[str] = []

    async def slow(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            stopped.append(context.tool_call_id)
            raise
        return {"never": True}

    async def cleanup(request: CleanupRequest) -> None:
        cleaned.append(request)

    register(tool("slow", slow, deadline=0.5, cleanup=cleanup, label="Slow job"))
    fake_providers.script([Call("c1", "slow", {})], [Text("It took too long.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Run the slow job.", cancels)

    assert turn.status == "completed"
    call_id = engine_call_id(turn.id, 0, 0)
    assert stopped == [call_id]
    assert [(r.tool_call_id, r.turn_id, r.reason) for r in cleaned] == [(call_id, turn.id, "timeout")]
    timeout = {"error": "timeout", "message": "Slow job did not finish within 0.5 s and was stopped."}
    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["status"], part["output"]) == ("failed", timeout)
    assert tool_results_sent(anthropic, fake_providers.requests[1].body) == {"c1": timeout}
    card = await final_card(turn.id, call_id)
    assert (card.status, card.summary) == ("failed", timeout["message"])
    assert 500 <= (card.finished_at - card.started_at).total_seconds() * 1000 < 20_000  # never the 30 s


async def test_it_gives_up_on_a_call_that_ignores_its_cancellation_after_the_grace(
    anthropic, register, fake_providers, cancels
):
    returned_late = asyncio.Event()
    may_answer = asyncio.Event()

    async def stubborn(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            # Ignores it, and answers anyway once the test lets it: after the turn ended.
            await asyncio.wait_for(may_answer.wait(), 120)
            returned_late.set()
            return {"late": "result"}
        return {"never": True}

    register(tool("stubborn", stubborn, deadline=0.3))
    fake_providers.script([Call("c1", "stubborn", {})], [Text("It did not stop in time.")])
    conversation_id = await new_conversation()

    started = time.monotonic()
    turn = await ask(conversation_id, "Run it.", cancels)
    took = time.monotonic() - started

    assert turn.status == "completed"  # without the call's answer: it never came while the turn ran
    assert took >= registry.GRACE
    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["status"], part["output"]["error"]) == ("failed", "timeout")
    may_answer.set()
    await asyncio.wait_for(returned_late.wait(), 20)
    await asyncio.sleep(0.2)
    # The late result changes nothing: the outcome was decided at the timeout.
    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["output"]["error"] == "timeout"
    assert (await final_card(turn.id, engine_call_id(turn.id, 0, 0))).status == "failed"
    assert [c["status"] for c in await cards(conversation_id)] == ["pending", "running", "failed"]


async def test_it_discards_a_result_that_arrives_after_the_owner_cancelled(
    anthropic, register, fake_providers, cancels
):
    finished_anyway = asyncio.Event()

    async def late(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)
            finished_anyway.set()
            return {"booked": True}
        return {}

    register(tool("book", late, effect=Effect.EFFECT))
    fake_providers.script([Call("c1", "book", {})], [Text("Not asked.")])
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Book it.")
    running = asyncio.ensure_future(run(turn.id, cancels))
    await eventually(lambda: has_event(conversation_id, "tool.started"), timeout=30, what="the call to start")
    from conversations.turns import turn_cancel

    await orm(turn_cancel)(conversation_id=conversation_id)
    await asyncio.wait_for(running, 10)
    await asyncio.wait_for(finished_anyway.wait(), 5)
    await asyncio.sleep(0.2)

    assert await turn_is(turn.id, "cancelled")
    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["status"], part["output"]["error"]) == ("cancelled", "cancelled")
    assert "partial" not in part["output"]  # the tool does not ask for it: the late value is dropped
    assert (await final_card(turn.id, engine_call_id(turn.id, 0, 0))).status == "cancelled"
    assert [c["status"] for c in await cards(conversation_id)] == ["pending", "running", "cancelled"]


async def test_it_offers_an_unavailable_tool_and_answers_at_once_with_what_to_configure(
    anthropic, register, fake_providers, cancels
):
    asked: list[str] = []

    async def search(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("an unavailable tool must not run")

    async def available(context: ToolContext) -> str | None:
        asked.append(context.tool_call_id)
        key = await context.provider_key("openai")
        return None if isinstance(key, Secret) else "Add an OpenAI API key in Settings to search the web."

    register(tool("search", search, available=available, label="Web search"))
    fake_providers.script([Call("c1", "search", {}), Call("c2", "search", {})], [Text("I cannot search yet.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Search for it.", cancels)

    assert turn.status == "completed"
    assert len(asked) == 1  # asked once for the turn, not per call
    first = fake_providers.requests[0].body
    assert "search" in [t["name"] for t in first["tools"]]  # still offered
    unavailable = {"error": "unavailable", "message": "Add an OpenAI API key in Settings to search the web."}
    assert [(p["status"], p["output"]) for p in tool_parts(await assistant_parts(turn.id))] == [
        ("unavailable", unavailable),
        ("unavailable", unavailable),
    ]
    assert tool_results_sent(anthropic, fake_providers.requests[1].body) == {"c1": unavailable, "c2": unavailable}
    card = await final_card(turn.id, engine_call_id(turn.id, 0, 0))
    assert (card.status, card.summary, card.execution_count) == ("unavailable", unavailable["message"], 0)


async def test_it_hands_a_tool_the_owners_key_through_its_context(anthropic, register, fake_providers, cancels):
    seen: list[str] = []

    async def search(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        key = await context.provider_key("openai")
        assert isinstance(key, Secret)
        seen.append(key.reveal())
        return {"results": 3}

    async def available(context: ToolContext) -> str | None:
        return None if isinstance(await context.provider_key("openai"), Secret) else "Add an OpenAI key."

    await orm(provider_key_set)(provider="openai", key=OPENAI_KEY)
    register(tool("search", search, available=available))
    fake_providers.script([Call("c1", "search", {})], [Text("Found three.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Search.", cancels)

    assert seen == [OPENAI_KEY]
    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["status"], part["output"]) == ("succeeded", {"results": 3})
    assert OPENAI_KEY not in json.dumps([e.data for e in await events(conversation_id)])


@pytest.mark.parametrize(("extra", "truncated"), [(0, False), (1, True)])
async def test_it_bounds_what_the_model_and_transcript_get_to_64_kib(
    anthropic, register, fake_providers, cancels, extra, truncated
):
    limit = registry.OUTPUT_LIMIT
    filler = limit - json_size({"text": ""}) + extra

    async def big(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        return {"text": "é" * (filler // 2) + "a" * (filler % 2)}

    register(tool("big", big))
    fake_providers.script([Call("c1", "big", {})], [Text("Read it.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Read the big page.", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    output = part["output"]
    assert json_size(output) <= limit
    assert (json_size(output) == limit) is not truncated
    assert output.get("truncated", False) is truncated
    assert part["status"] == "succeeded"
    assert tool_results_sent(anthropic, fake_providers.requests[1].body) == {"c1": output}
    finished = [e.data for e in await events(conversation_id) if e.kind == "tool.finished"]
    assert finished[0]["output"] == output


async def test_it_keeps_to_the_smaller_output_limit_a_tool_declares(anthropic, register, fake_providers, cancels):
    async def listing(context: ToolContext, data: dict[str, Any]) -> list[str]:
        return [f"line {i}" for i in range(2000)]

    register(tool("listing", listing, output_limit=2048))
    fake_providers.script([Call("c1", "listing", {})], [Text("A long list.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "List.", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["output"]["truncated"] is True
    assert json_size(part["output"]) <= 2048
    assert part["output"]["output"].startswith('["line 0","line 1"')


async def test_it_counts_an_ok_false_result_as_failed_on_the_card(anthropic, register, fake_providers, cancels):
    async def fetch(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        return {"ok": False, "status": 404, "reason": "not found"}

    register(tool("fetch", fetch, summarize=lambda result: f"HTTP {result['status']}"))
    fake_providers.script([Call("c1", "fetch", {})], [Text("The page is gone.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Fetch it.", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["status"], part["output"]) == ("failed", {"ok": False, "status": 404, "reason": "not found"})
    card = await final_card(turn.id, engine_call_id(turn.id, 0, 0))
    assert (card.status, card.summary) == ("failed", "HTTP 404")


async def test_it_coalesces_progress_to_four_writes_a_second_and_flushes_the_latest_at_the_end(
    anthropic, register, fake_providers, cancels
):
    reports = 60

    async def crawl(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        for done in range(1, reports + 1):
            await context.report_progress({"message": f"Page {done}", "done": done, "total": reports})
            await asyncio.sleep(0.01)
        return {"pages": reports}

    register(tool("crawl", crawl, summarize=lambda result: f"{result['pages']} pages"))
    fake_providers.script([Call("c1", "crawl", {})], [Text("Crawled.")])
    conversation_id = await new_conversation()

    started = time.monotonic()
    turn = await ask(conversation_id, "Crawl.", cancels)
    took = time.monotonic() - started

    rows = await events(conversation_id)
    progress = [e.data["progress"] for e in rows if e.kind == "tool.progress"]
    assert progress[0] == {"message": "Page 1", "done": 1, "total": reports}  # the first at once
    assert 2 <= len(progress) <= took / 0.25 + 2
    finished = (await final_card(turn.id, engine_call_id(turn.id, 0, 0))).progress
    assert finished == {"message": f"Page {reports}", "done": reports, "total": reports}
    assert [c["status"] for c in await cards(conversation_id)][-1] == "succeeded"


async def test_it_keeps_every_tool_part_in_agreement_with_its_card(anthropic, register, fake_providers, cancels):
    async def ok(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True}

    async def soft_fail(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        return {"ok": False}

    async def never(context: ToolContext) -> str | None:
        return "Not configured here."

    register(tool("good", ok))
    register(tool("soft", soft_fail))
    register(tool("absent", ok, available=never))
    register(tool("strict", ok, schema=CITY))
    calls = [
        Call("c1", "good", {}),
        Call("c2", "soft", {}),
        Call("c3", "absent", {}),
        Call("c4", "strict", {}),
        Call("c5", "no_such_tool", {}),
    ]
    fake_providers.script(calls, [Text("Done.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Do it all.", cancels)

    parts = {p["tool_call_id"]: p["status"] for p in tool_parts(await assistant_parts(turn.id))}
    rows = ToolActivity.objects.filter(turn_id=turn.id)
    stored = await orm(lambda: dict(rows.values_list("tool_call_id", "status")))()
    assert (
        parts
        == stored
        == {
            engine_call_id(turn.id, 0, 0): "succeeded",
            engine_call_id(turn.id, 0, 1): "failed",
            engine_call_id(turn.id, 0, 2): "unavailable",
            engine_call_id(turn.id, 0, 3): "failed",
            engine_call_id(turn.id, 0, 4): "failed",
        }
    )
    last_card = {c["tool_call_id"]: c["status"] for c in await cards(conversation_id)}
    assert last_card == parts


async def test_it_stops_renewing_the_lease_for_a_call_past_its_deadline_and_grace(anthropic, monkeypatch):
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Anything.")
    claim = await orm(turn_claim)(turn_id=turn.id)
    monkeypatch.setattr(runner, "LEASE_RENEW_SECONDS", 0.05)

    async def expiry() -> Any:
        return (await turn_get(turn.id)).lease_expires_at

    watch = CallWatch()
    watch.begin("c1", 60)
    before = await expiry()
    heartbeat = asyncio.ensure_future(runner._heartbeat(claim, watch))
    await eventually(lambda: _later(expiry, before), timeout=30, what="the lease to be renewed")
    watch.begin("c1", -1)  # past its deadline plus grace
    await asyncio.wait_for(heartbeat, 5)  # the heartbeat gives up
    held = await expiry()
    await asyncio.sleep(0.2)
    assert await expiry() == held
    assert held < timezone.now() + LEASE


async def _later(read: Any, before: Any) -> bool:
    return (await read()) > before


async def test_it_waits_for_cleanup_when_a_conversation_is_deleted_mid_call(
    anthropic, register, fake_providers, cancels
):
    cleaned: list[tuple[str, str | None, bool]] = []

    async def hold(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(30)
        return {}

    async def cleanup(request: CleanupRequest) -> None:
        await asyncio.sleep(0.2)  # releasing a container takes a moment
        cleaned.append((request.reason, request.tool_call_id, True))

    register(tool("sandbox", hold, effect=Effect.EFFECT, cleanup=cleanup, deadline=60))
    fake_providers.script([Call("c1", "sandbox", {})], [Text("Not asked.")])
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Run it in the sandbox.")
    running = asyncio.ensure_future(run(turn.id, cancels))
    await eventually(lambda: has_event(conversation_id, "tool.started"), timeout=30, what="the call to start")

    await orm(conversation_delete)(conversation_id=conversation_id)
    gone = await orm(conversation_teardown)(conversation_id=conversation_id)
    await asyncio.wait_for(running, 10)

    assert gone is True
    assert cleaned == [("cancelled", engine_call_id(turn.id, 0, 0), True), ("deleted", None, True)]
    assert not await orm(Conversation.objects.filter(id=conversation_id).exists)()
    assert not await orm(ToolActivity.objects.filter(conversation_id=conversation_id).exists)()


async def test_it_keeps_a_deleted_conversation_until_every_tool_released_it(anthropic, register):
    failing = [True]

    async def cleanup(request: CleanupRequest) -> None:
        if failing[0]:
            raise RuntimeError("the engine did not answer")

    register(tool("sandbox", _never_called, effect=Effect.EFFECT, cleanup=cleanup))
    conversation_id = await new_conversation()
    await orm(conversation_delete)(conversation_id=conversation_id)

    assert await orm(conversation_teardown)(conversation_id=conversation_id) is False
    assert await orm(Conversation.objects.filter(id=conversation_id).exists)()

    failing[0] = False
    assert await orm(conversation_teardown)(conversation_id=conversation_id) is True
    assert not await orm(Conversation.objects.filter(id=conversation_id).exists)()


async def test_it_leaves_a_newer_turns_activities_alone_when_an_older_turn_ends(anthropic):
    from tools.activity import activity_begin, activity_running, activity_store

    conversation_id = await new_conversation()
    older = await submit(conversation_id, "First.")
    newer = await submit(conversation_id, "Second.")
    claim = await orm(turn_claim)(turn_id=older.id)

    def open_calls() -> None:
        for turn_id in (older.id, newer.id):
            activity = activity_begin(conversation_id=conversation_id, turn_id=turn_id, tool_call_id="c1", name="x")
            activity_running(activity)
            activity_store(activity)
        Turn.objects.filter(id=older.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    await orm(open_calls)()
    from conversations.turns import turn_finish

    assert await orm(turn_finish)(turn_id=older.id, lease_token=claim.lease_token, status="failed", code="x")
    statuses = await orm(lambda: dict(ToolActivity.objects.values_list("turn_id", "status")))()
    assert statuses == {older.id: "interrupted", newer.id: "running"}


async def test_it_tells_a_tool_whether_its_conversation_is_still_live(anthropic, register, fake_providers, cancels):
    seen: list[bool] = []
    arrived, deleted = asyncio.Event(), asyncio.Event()

    async def write(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        seen.append(await db(context.conversation_live)())
        arrived.set()
        await deleted.wait()
        seen.append(await db(context.conversation_live)())
        return {}

    register(tool("write", write, effect=Effect.EFFECT))
    fake_providers.script([Call("c1", "write", {})], [Text("Done.")])
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Write it down.")
    running = asyncio.ensure_future(run(turn.id, cancels))
    await asyncio.wait_for(arrived.wait(), 10)

    await orm(conversation_delete)(conversation_id=conversation_id)
    deleted.set()
    await asyncio.wait_for(running, 10)

    assert seen == [True, False]


async def test_it_runs_calls_beyond_the_limit_one_after_another_when_the_tool_waits(
    anthropic, register, fake_providers, cancels
):
    running: list[int] = []
    most = [0]

    async def job(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        running.append(1)
        most[0] = max(most[0], len(running))
        await asyncio.sleep(0.3)
        running.pop()
        return {"done": True}

    register(tool("job", job, concurrency=1))
    fake_providers.script([Call("c1", "job", {}), Call("c2", "job", {})], [Text("Both done.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Run two jobs.", cancels)

    assert most[0] == 1
    assert [p["status"] for p in tool_parts(await assistant_parts(turn.id))] == ["succeeded", "succeeded"]
    statuses = [c["status"] for c in await cards(conversation_id) if c["tool_call_id"] == engine_call_id(turn.id, 0, 1)]
    assert statuses[0] == "pending"  # it waited for the place before it ran
    assert not await orm(ToolSlot.objects.exists)()


async def test_it_refuses_a_call_beyond_the_limit_at_once_when_the_tool_does_not_wait(
    anthropic, register, fake_providers, cancels
):
    async def job(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.5)
        return {"done": True}

    register(tool("shellish", job, concurrency=1, concurrency_wait=False, label="Shell"))
    fake_providers.script([Call("c1", "shellish", {}), Call("c2", "shellish", {})], [Text("One ran.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Run two.", cancels)

    parts = {p["tool_call_id"]: p for p in tool_parts(await assistant_parts(turn.id))}
    outcomes = sorted((p["status"], p["output"].get("error")) for p in parts.values())
    assert outcomes == [("failed", "busy"), ("succeeded", None)]
    busy = next(p for p in parts.values() if p["status"] == "failed")
    assert busy["output"]["message"].startswith("Shell is busy: 1 calls already run at once.")


async def test_it_leaves_a_kept_place_taken_until_the_tool_gives_it_back(anthropic, register, fake_providers, cancels):
    kept: list[Any] = []

    async def sandbox(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        assert context.place is not None
        context.place.keep()  # its container's removal is still pending
        kept.append(context.place.held)
        return {"cleanup": "pending"}

    register(tool("sandbox", sandbox, concurrency=1, concurrency_wait=False, effect=Effect.EFFECT))
    fake_providers.script([Call("c1", "sandbox", {})], [Text("Ran.")], [Call("c2", "sandbox", {})], [Text("Busy.")])
    conversation_id = await new_conversation()

    await ask(conversation_id, "Run it.", cancels)
    second = await ask(conversation_id, "Again.", cancels)

    [part] = tool_parts(await assistant_parts(second.id))
    assert part["output"]["error"] == "busy"
    await orm(slot_release)(held=kept[0])
    fake_providers.script([Call("c3", "sandbox", {})], [Text("Ran again.")])
    third = await ask(conversation_id, "Once more.", cancels)
    [part] = tool_parts(await assistant_parts(third.id))
    assert part["status"] == "succeeded"


async def test_it_keeps_what_a_stopped_call_handed_back_as_partial_when_its_tool_asks(
    anthropic, register, fake_providers, cancels
):
    async def printing(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return {"printed": "so far"}
        return {}

    register(tool("printer", printing, effect=Effect.EFFECT, keeps_partial=True))
    fake_providers.script([Call("c1", "printer", {})], [Text("Not asked.")])
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Print.")
    running = asyncio.ensure_future(run(turn.id, cancels))
    await eventually(lambda: has_event(conversation_id, "tool.started"), timeout=30, what="the call to start")
    from conversations.turns import turn_cancel

    await orm(turn_cancel)(conversation_id=conversation_id)
    await asyncio.wait_for(running, 10)

    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["status"] == "cancelled"
    assert part["output"] == {
        "error": "cancelled",
        "message": "The owner stopped this turn.",
        "partial": {"printed": "so far"},
    }
    assert (await final_card(turn.id, engine_call_id(turn.id, 0, 0))).status == "cancelled"
