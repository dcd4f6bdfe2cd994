"""A fast lane for starting turns: the web rings, a worker's engine loop answers at once.

Celery stays the durable path: every submitted turn is also a `turn_run` task. But a
burst of tasks reaches the engine slowly, because Celery's consumer thread receives them
one by one while competing for the interpreter lock with the streaming turns. The
doorbell is a Redis list the engine loop itself pops in batches; whichever of the two
reaches a turn first claims it, and the other finds the lease taken (the claim is a
conditional update, so a turn never runs twice at once). A lost ring costs nothing but speed.

The Celery task itself goes out a moment later (`durable_send_later`), and only for a turn
that no live attempt holds then: a turn the doorbell started needs no task (were its worker
to die, its lease would expire and reconciliation would requeue it, as for any running turn),
and a burst of task deliveries in the workers delays every stream there. If this process
dies in that moment, reconciliation requeues the queued turn.

Both ends live here, beside the turn services rather than in `engine/`: the services ring
(`turns.enqueue_turn`) and the engine listens (`DoorbellListener`), and the services never
import the engine that runs them.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from contextlib import suppress
from typing import Any

import redis
import redis.asyncio as aioredis
from celery import current_app
from django.conf import settings

from conversations.selectors import turns_awaiting_worker
from flarebot.core.database import on_long_lived_thread

logger = logging.getLogger(__name__)

KEY = "flarebot:turn-doorbell"
# A ring nobody answered within this time is stale: Celery has delivered the turn by then.
RING_TTL_SECONDS = 60
MAX_WAITING = 1000  # bounds the list while no worker listens
BATCH = 32
# How long one BRPOP waits on the server. The listener's socket must wait longer (redis-py's
# default read timeout equals it): else a quiet spell reads as a lost Redis, and the pause
# after one delays the turns that ring meanwhile.
BLOCK_SECONDS = 5
SOCKET_TIMEOUT_SECONDS = BLOCK_SECONDS + 5

_client: redis.Redis | None = None


def _sync_client() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    return _client


def doorbell_ring(turn_id: uuid.UUID) -> None:
    """Tell some worker that a turn can start now (best effort)."""
    try:
        with _sync_client().pipeline(transaction=True) as pipe:
            pipe.lpush(KEY, str(turn_id))
            pipe.ltrim(KEY, 0, MAX_WAITING - 1)
            pipe.expire(KEY, RING_TTL_SECONDS)
            pipe.execute()
    except redis.RedisError:
        logger.warning("could not ring the doorbell for turn %s; Celery delivers it", turn_id)


# Long enough for a turn to start from the doorbell first; its task is then not needed.
DURABLE_DELAY_SECONDS = 2.0

SEND_BATCH = 100
# A task no worker took within this time is dropped: while the turn is still unheld,
# reconciliation (every few seconds) sends it again, so tasks do not pile up while no
# worker runs.
TASK_EXPIRES_SECONDS = 300
_backlog: queue.SimpleQueue[tuple[float, uuid.UUID]] = queue.SimpleQueue()
_sender: threading.Thread | None = None
_sender_lock = threading.Lock()


def durable_send_later(turn_id: uuid.UUID) -> None:
    """Send the turn's Celery task after DURABLE_DELAY_SECONDS, from a background thread."""
    global _sender
    _backlog.put((time.monotonic() + DURABLE_DELAY_SECONDS, turn_id))
    with _sender_lock:
        if _sender is None or not _sender.is_alive():
            _sender = threading.Thread(target=_send_due, name="turn-task-sender", daemon=True)
            _sender.start()


def _send_due() -> None:
    later: tuple[float, uuid.UUID] | None = None
    while True:
        due, turn_id = later or _backlog.get()  # in order: every task waits the same delay
        later = None
        time.sleep(max(0.0, due - time.monotonic()))
        batch = [turn_id]
        while len(batch) < SEND_BATCH:  # the others due by now are checked together
            try:
                queued = _backlog.get_nowait()
            except queue.Empty:
                break
            if queued[0] > time.monotonic():
                later = queued
                break
            batch.append(queued[1])
        for turn_id in _not_started(batch):
            try:
                current_app.send_task("conversations.jobs.turn_run", args=[str(turn_id)], expires=TASK_EXPIRES_SECONDS)
            except Exception:
                logger.warning("could not enqueue turn %s; reconciliation requeues it", turn_id, exc_info=True)


def _not_started(turn_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """The turns no worker holds yet; all of them if the database cannot tell."""
    try:
        awaiting = on_long_lived_thread(turns_awaiting_worker, turn_ids=turn_ids)
    except Exception:  # whatever the reason, the sender thread must live on
        logger.warning("could not check which turns started; sending all their tasks", exc_info=True)
        return turn_ids
    return [turn_id for turn_id in turn_ids if turn_id in awaiting]


TurnStarter = Callable[[uuid.UUID], Coroutine[Any, Any, None]]


class DoorbellListener:
    """Pops rung turns on the engine loop and starts each, while capacity lasts."""

    def __init__(self, start: TurnStarter, *, capacity: int) -> None:
        self._start = start
        self._slots = asyncio.Semaphore(capacity)
        self._running: set[asyncio.Task[None]] = set()
        self._stopped = False

    async def listen(self) -> None:
        client = aioredis.Redis.from_url(settings.REDIS_URL, socket_timeout=SOCKET_TIMEOUT_SECONDS)
        try:
            while not self._stopped:
                try:
                    await self._answer(client)
                except (redis.RedisError, OSError):
                    logger.warning("turn doorbell lost Redis; Celery delivers turns meanwhile", exc_info=True)
                    await asyncio.sleep(1)
        finally:
            with suppress(Exception):
                await client.aclose()

    async def _answer(self, client: aioredis.Redis) -> None:
        await self._slots.acquire()
        self._slots.release()  # only waits for a free slot; each turn takes its own below
        popped = await client.brpop([KEY], timeout=BLOCK_SECONDS)
        if popped is None or self._stopped:
            return
        more = await client.rpop(KEY, BATCH - 1)  # what else rang meanwhile, in one round trip
        for raw in [popped[1], *(more if isinstance(more, list) else [])]:
            with suppress(ValueError, UnicodeDecodeError):
                self._spawn(uuid.UUID(raw.decode("ascii") if isinstance(raw, bytes) else raw))

    def _spawn(self, turn_id: uuid.UUID) -> None:
        task = asyncio.get_running_loop().create_task(self._run(turn_id))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, turn_id: uuid.UUID) -> None:
        async with self._slots:
            try:
                await self._start(turn_id)
            except Exception:
                # The turn's lease expires and reconciliation retries it.
                logger.exception("turn %s failed in the engine", turn_id)

    def stop(self) -> None:
        """Answer no more rings (the worker is shutting down)."""
        self._stopped = True

    async def drain(self) -> None:
        """Wait for the turns this listener started."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)
