"""Cancellation reaches a running turn through Redis pub/sub, within well under a second.

The database flag `Turn.cancel_requested` is the truth, checked at claim and between
steps; this bus only makes a worker notice it while it is streaming.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import suppress

import redis
import redis.asyncio as aioredis
from django.conf import settings

logger = logging.getLogger(__name__)

CHANNEL = "flarebot:turn-cancel"


def publish_cancel(turn_id: uuid.UUID) -> None:
    """Tell every worker that this turn should stop."""
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        client.publish(CHANNEL, str(turn_id))
        client.close()
    except redis.RedisError:
        logger.warning("could not announce the cancellation of turn %s; it stops at its next step", turn_id)


class CancelListener:
    """One subscription per worker process; running turns register an asyncio.Event each."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self._task: asyncio.Task[None] | None = None

    def watch(self, turn_id: uuid.UUID) -> asyncio.Event:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._listen())
        event = self._events.setdefault(str(turn_id), asyncio.Event())
        return event

    def forget(self, turn_id: uuid.UUID) -> None:
        self._events.pop(str(turn_id), None)

    async def _listen(self) -> None:
        while True:
            client = aioredis.Redis.from_url(settings.REDIS_URL)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(CHANNEL)
                    async for message in pubsub.listen():
                        if message.get("type") != "message":
                            continue
                        event = self._events.get(message["data"].decode("ascii", "replace"))
                        if event is not None:
                            event.set()
            except (redis.RedisError, OSError):
                logger.warning("cancel listener lost Redis; reconnecting", exc_info=True)
                await asyncio.sleep(1)
            finally:
                with suppress(Exception):
                    await client.aclose()
