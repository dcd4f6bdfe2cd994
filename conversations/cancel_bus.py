"""Cancellation reaches a running turn through Redis pub/sub, within well under a second.

The database flag `Turn.cancel_requested` is the truth, checked at claim and between
steps; this bus only makes a worker notice it while it is streaming. Both ends live here,
outside `engine/`: the services that cancel publish, the engine (and a browser task's
runner) listens, and the services never import the engine that runs them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import suppress

import redis
import redis.asyncio as aioredis
from django.conf import settings

from conversations.models import Turn
from flarebot.core.database import db

logger = logging.getLogger(__name__)


def _channel() -> str:
    """This instance's cancellation channel (pub/sub channels are server-wide: settings.REDIS_NAMESPACE)."""
    return f"{settings.REDIS_NAMESPACE}:turn-cancel"


def publish_cancel(turn_id: uuid.UUID) -> None:
    """Tell every worker that this turn should stop."""
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        client.publish(_channel(), str(turn_id))
        client.close()
    except redis.RedisError:
        logger.warning("could not announce the cancellation of turn %s; it stops at its next step", turn_id)


def turns_cancel_flagged(turn_ids: list[str]) -> list[str]:
    """Return which of these turns carry the cancel flag in the database."""
    flagged = Turn.objects.filter(id__in=turn_ids, cancel_requested=True).values_list("id", flat=True)
    return [str(turn_id) for turn_id in flagged]


class CancelListener:
    """One subscription per worker process; running turns register an asyncio.Event each.

    Whenever the subscription is (re)established, the database flags of the watched turns
    are read again, so a cancel announced while the listener was not subscribed still
    arrives.
    """

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def watch(self, turn_id: uuid.UUID, *, ready_within: float = 1.0) -> asyncio.Event:
        """Watch a turn for cancellation; wait briefly until the subscription is live."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._listen())
        event = self._events.setdefault(str(turn_id), asyncio.Event())
        with suppress(TimeoutError):
            await asyncio.wait_for(self._subscribed.wait(), timeout=ready_within)
        return event

    def forget(self, turn_id: uuid.UUID) -> None:
        self._events.pop(str(turn_id), None)

    async def close(self) -> None:
        """Stop listening (tests; a worker keeps its listener for its lifetime)."""
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _recheck_flags(self) -> None:
        watched = list(self._events)
        if not watched:
            return
        flagged = await db(turns_cancel_flagged)(watched)
        for turn_id in flagged:
            event = self._events.get(turn_id)
            if event is not None:
                event.set()

    async def _listen(self) -> None:
        while True:
            client = aioredis.Redis.from_url(settings.REDIS_URL)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(_channel())
                    self._subscribed.set()
                    await self._recheck_flags()
                    async for message in pubsub.listen():
                        if message.get("type") != "message":
                            continue
                        event = self._events.get(message["data"].decode("ascii", "replace"))
                        if event is not None:
                            event.set()
            except (redis.RedisError, OSError):
                self._subscribed.clear()
                logger.warning("cancel listener lost Redis; reconnecting", exc_info=True)
                await asyncio.sleep(1)
            finally:
                with suppress(Exception):
                    await client.aclose()
