"""Helpers of the browser task tests: proposals and starts through the services, runs in this process.

A task's scripted model is the loopback provider's queue: each answer is one step's tool
call (`step(...)`). Runs happen on the test's own event loop, with the browser pool and the
kept contexts of that loop, exactly as a worker's engine loop holds them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from channels.db import database_sync_to_async

from conversations.browser_tasks import lifecycle, services
from conversations.browser_tasks.runner import browser_task_run
from conversations.cancel_bus import CancelListener
from conversations.models import BrowserTask, CriticalPoint, Event
from conversations.services import conversation_create
from tests.support.fake_providers import Call, FakeProviders, Recorded, Step

_ids = itertools.count(1)
SETTLED = ("paused", "completed", "failed", "cancelled")


def orm(function: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    return database_sync_to_async(function)


def step(name: str, **data: Any) -> list[Step]:
    """One answer of the task's model: exactly one tool call."""
    return [Call(f"toolu_step_{next(_ids)}", name, data)]


async def new_conversation() -> uuid.UUID:
    return (await orm(conversation_create)()).id


async def propose(
    conversation_id: uuid.UUID, *, goal: str, start_url: str, restrictions: list[str] | None = None
) -> uuid.UUID:
    """A proposal as the chat tool stores it (a turn id and tool call id of its own)."""
    proposal = await orm(services.browser_task_propose)(
        conversation_id=conversation_id,
        turn_id=uuid.uuid4(),
        tool_call_id=f"call-{next(_ids)}",
        goal=goal,
        start_url=start_url,
        restrictions=restrictions or [],
    )
    return proposal.id


async def start(conversation_id: uuid.UUID, proposal_id: uuid.UUID) -> uuid.UUID:
    task = await orm(services.browser_task_start)(conversation_id=conversation_id, proposal_id=proposal_id)
    return task.id


async def task_get(task_id: uuid.UUID) -> BrowserTask:
    return await orm(BrowserTask.objects.get)(id=task_id)


async def open_point(task_id: uuid.UUID) -> CriticalPoint | None:
    return await orm(CriticalPoint.objects.filter(task_id=task_id, state="open").first)()


async def settled(task_id: uuid.UUID, *, timeout: float = 60.0) -> BrowserTask:
    """Wait until the task paused or ended and no attempt holds it."""
    deadline = time.monotonic() + timeout
    while True:
        task = await task_get(task_id)
        if task.status in SETTLED and not task.lease_token:
            return task
        if time.monotonic() > deadline:
            raise AssertionError(f"task {task_id} did not settle within {timeout} s: {task.status}")
        await asyncio.sleep(0.05)


async def run(task_id: uuid.UUID, cancels: CancelListener, *, timeout: float = 60.0) -> BrowserTask:
    """Run (or resume) a task in this process until it pauses or ends."""
    await asyncio.wait_for(browser_task_run(task_id, cancels=cancels), timeout)
    return await settled(task_id, timeout=timeout)


async def answer(
    conversation_id: uuid.UUID,
    point_id: Any,
    *,
    response: str | None = None,
    consent: bool | None = None,
    approve: bool | None = None,
) -> None:
    reply = services.Reply(str(point_id), response=response, consent=consent, approve=approve)
    await orm(services.critical_point_answer)(conversation_id=conversation_id, reply=reply)


async def events(conversation_id: uuid.UUID) -> list[Event]:
    return await orm(lambda: list(Event.objects.filter(conversation_id=conversation_id).order_by("sequence")))()


async def kinds(conversation_id: uuid.UUID) -> list[str]:
    return [event.kind for event in await events(conversation_id)]


def page_sent(request: Recorded) -> str:
    """The current page a step's request showed the task's model (its last user message), as text."""
    last = request.body["messages"][-1]
    content = last["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if block.get("type") == "text")


def results_sent(request: Recorded) -> list[Any]:
    """The results of the steps so far that a request carried, in order (Anthropic's format)."""
    return [
        json.loads(block["content"])
        for message in request.body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def task_requests(fake_providers: FakeProviders) -> list[Recorded]:
    return [
        r
        for r in fake_providers.requests
        if r.path == "/v1/messages" and "go_to" in json.dumps(r.body.get("tools", []))
    ]


def paused_task(
    conversation_id: uuid.UUID,
    *,
    kind: str = "question",
    question: str = "Which size?",
    start_url: str = "",
    restrictions: list[str] | None = None,
) -> tuple[BrowserTask, CriticalPoint]:
    """A started task paused at a critical point of `kind`, without a browser (synchronous)."""
    proposal = services.browser_task_propose(
        conversation_id=conversation_id,
        turn_id=uuid.uuid4(),
        tool_call_id=f"call-{next(_ids)}",
        goal="Buy a kettle.",
        start_url=start_url or "https://shop.example/",
        restrictions=["At most 30 EUR."] if restrictions is None else restrictions,
    )
    task = services.browser_task_start(conversation_id=conversation_id, proposal_id=proposal.id)
    claim = lifecycle.browser_task_claim(task_id=task.id)
    assert claim is not None
    step = {"id": "step-1", "name": "ask_owner", "input": {"question": question}, "result": None}
    point_id = uuid.uuid4()
    step["critical_point_id"] = str(point_id)
    progress = lifecycle.Progress([step], 0, 0, "https://shop.example/", None)
    lifecycle.browser_task_pause(
        task_id=task.id,
        lease_token=claim.lease_token,
        progress=progress,
        pause=lifecycle.Pause(kind, question),
        point_id=point_id,
        storage_state=None,
    )
    return BrowserTask.objects.get(id=task.id), CriticalPoint.objects.get(id=point_id)
