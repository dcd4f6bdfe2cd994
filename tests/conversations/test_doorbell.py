"""The turn doorbell: rings reach a listening engine at once, and never start a turn twice."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from conversations import doorbell
from conversations.doorbell import DoorbellListener, doorbell_ring
from conversations.engine.runtime import EngineRuntime
from conversations.models import Event, Message, Turn
from conversations.services import conversation_create
from conversations.turns import turn_submit
from tests.support.engine import engine_cleanup, eventually
from tests.support.fake_providers import Text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


@pytest.fixture(autouse=True)
def empty_doorbell(settings):
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(doorbell.KEY)
    doorbell._client = None  # the settings' Redis of this test
    yield client
    client.delete(doorbell.KEY)


class Starter:
    def __init__(self) -> None:
        self.started: list[uuid.UUID] = []
        self.release = asyncio.Event()
        self.running = 0
        self.most_at_once = 0

    async def __call__(self, turn_id: uuid.UUID) -> None:
        self.started.append(turn_id)
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await self.release.wait()
        finally:
            self.running -= 1


async def listening(listener: DoorbellListener) -> asyncio.Task[None]:
    task = asyncio.get_running_loop().create_task(listener.listen())
    await asyncio.sleep(0.05)
    return task


async def stop(listener: DoorbellListener, task: asyncio.Task[None]) -> None:
    listener.stop()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_it_starts_every_rung_turn_in_ring_order():
    starter = Starter()
    listener = DoorbellListener(starter, capacity=10)
    turn_ids = [uuid.uuid4() for _ in range(5)]
    for turn_id in turn_ids:
        doorbell_ring(turn_id)
    task = await listening(listener)
    try:
        await eventually(lambda: _async(len(starter.started) == 5), timeout=30, what="every ring answered")
        assert starter.started == turn_ids
    finally:
        starter.release.set()
        await stop(listener, task)


async def test_it_starts_no_more_turns_at_once_than_its_capacity():
    starter = Starter()
    listener = DoorbellListener(starter, capacity=2)
    task = await listening(listener)
    try:
        for _ in range(4):
            doorbell_ring(uuid.uuid4())
        await eventually(lambda: _async(starter.running == 2), timeout=30, what="two turns running")
        await asyncio.sleep(0.2)
        assert starter.running == 2
        starter.release.set()
        await eventually(lambda: _async(len(starter.started) == 4), timeout=30, what="the other two")
        assert starter.most_at_once == 2
    finally:
        starter.release.set()
        await stop(listener, task)


async def test_it_keeps_listening_through_a_quiet_spell_longer_than_one_wait(caplog):
    """A BRPOP that waits its whole time out is quiet, not a lost Redis (whose pause would delay the next turns)."""
    starter = Starter()
    listener = DoorbellListener(starter, capacity=4)
    task = await listening(listener)
    try:
        await asyncio.sleep(doorbell.BLOCK_SECONDS + 1.5)
        turn_id = uuid.uuid4()
        doorbell_ring(turn_id)
        await eventually(
            lambda: _async(starter.started == [turn_id]), timeout=30, what="the ring after the quiet spell"
        )
        assert "lost Redis" not in caplog.text
    finally:
        starter.release.set()
        await stop(listener, task)


async def test_it_ignores_a_ring_that_is_not_a_turn_id(empty_doorbell):
    starter = Starter()
    listener = DoorbellListener(starter, capacity=4)
    empty_doorbell.lpush(doorbell.KEY, "not-a-uuid", b"\xff\xfe")
    good = uuid.uuid4()
    doorbell_ring(good)
    task = await listening(listener)
    try:
        await eventually(lambda: _async(starter.started == [good]), timeout=30, what="the valid ring")
    finally:
        starter.release.set()
        await stop(listener, task)


def test_it_keeps_rings_bounded_and_short_lived_while_no_worker_listens(empty_doorbell):
    for _ in range(doorbell.MAX_WAITING + 5):
        doorbell_ring(uuid.uuid4())

    assert empty_doorbell.llen(doorbell.KEY) == doorbell.MAX_WAITING
    assert 0 < empty_doorbell.ttl(doorbell.KEY) <= doorbell.RING_TTL_SECONDS


def test_a_lost_ring_is_only_logged(settings, caplog):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    doorbell._client = None

    doorbell_ring(uuid.uuid4())

    assert "Celery delivers it" in caplog.text


async def _async(value: bool) -> bool:
    return value


def test_the_engine_runs_a_turn_once_when_the_doorbell_and_two_celery_deliveries_race(anthropic, fake_providers):
    fake_providers.script([Text("Only "), Text("once.", delay=0.3)], [Text("A second run.")])
    conversation = conversation_create(name="Race")
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Say it once.")
    runtime = EngineRuntime()  # answers the ring of the submit
    try:
        with ThreadPoolExecutor(2) as pool:  # two deliveries of the Celery task at once
            list(pool.map(lambda _: runtime.run(runtime.turn(turn.id)), range(2)))

        assert Turn.objects.get(id=turn.id).status == "completed"
        assert len(fake_providers.requests) == 1
        answer = Message.objects.get(turn=turn, role="assistant")
        assert [p["text"] for p in answer.parts if p["type"] == "text"] == ["Only once."]
        assert Event.objects.filter(turn_id=turn.id, kind="turn.started").count() == 1
    finally:
        runtime.shutdown(5)
        runtime.run(engine_cleanup(runtime.cancels))
        runtime.loop.call_soon_threadsafe(runtime.loop.stop)


def queued_turn_tasks(client: redis.Redis) -> list[str]:
    """The turn ids of the turn_run tasks waiting in Celery's `turns` queue."""
    bodies = [json.loads(base64.b64decode(json.loads(m)["body"])) for m in client.lrange("turns", 0, -1)]
    return [args[0] for args, _, _ in bodies]


def test_the_durable_celery_task_goes_out_a_moment_after_the_ring(empty_doorbell):
    conversation = conversation_create(name="Nobody answers")
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Anyone?")

    assert str(turn.id) not in queued_turn_tasks(empty_doorbell)  # the doorbell's moment first
    deadline = time.monotonic() + doorbell.DURABLE_DELAY_SECONDS + 5
    while str(turn.id) not in queued_turn_tasks(empty_doorbell):
        assert time.monotonic() < deadline, "the Celery task never went out"
        time.sleep(0.05)


def test_no_celery_task_goes_out_for_a_turn_a_live_attempt_holds(empty_doorbell):
    held, expired, waiting = (conversation_create(name=name) for name in ("Held", "Expired", "Waiting"))
    submitted = {
        c.name: turn_submit(conversation_id=c.id, request_id=uuid.uuid4(), text="Go.")[0].id
        for c in (held, expired, waiting)
    }
    now = timezone.now()  # as a worker's claim leaves them; the second one's worker died
    Turn.objects.filter(id=submitted["Held"]).update(status="running", lease_expires_at=now + timedelta(minutes=1))
    Turn.objects.filter(id=submitted["Expired"]).update(status="running", lease_expires_at=now - timedelta(seconds=1))

    deadline = time.monotonic() + doorbell.DURABLE_DELAY_SECONDS + 5
    while not {str(submitted["Expired"]), str(submitted["Waiting"])} <= set(queued_turn_tasks(empty_doorbell)):
        assert time.monotonic() < deadline, "the tasks of the turns nobody holds never went out"
        time.sleep(0.05)
    assert str(submitted["Held"]) not in queued_turn_tasks(empty_doorbell)
