"""Publishing frames to conversation groups, many at once in one Redis round trip.

Channels' Redis pub/sub layer sends each `group_send` alone, one after the other behind a
lock per connection: with dozens of turns streaming on one event loop, publishes queue up
behind each other's round trips, and a stored delta waits for all of them before it
reaches its socket. Here every publish that arrives while one is in flight joins the
next pipeline; order is kept, so each conversation's frames still arrive in sequence.
Messages are the layer's own (same channel names and serializer), so consumers see no
difference. With another layer, each message goes through its plain `group_send`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import defaultdict
from typing import Any

from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer


class _Pipelines:
    """The publishes of one event loop: one pipeline per shard in flight at a time."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.queue: list[tuple[str, dict[str, Any], asyncio.Future[None]]] = []
        self.draining = False

    async def send(self, group: str, message: dict[str, Any]) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append((group, message, future))
        if not self.draining:
            self.draining = True
            asyncio.get_running_loop().create_task(self._drain())
        await future

    async def _drain(self) -> None:
        try:
            while self.queue:
                batch, self.queue = self.queue, []
                try:
                    await self._publish([(group, message) for group, message, _ in batch])
                except Exception as error:
                    for _, _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                    continue
                for _, _, future in batch:
                    if not future.done():
                        future.set_result(None)
        finally:
            self.draining = False

    async def _publish(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        loop_layer = self.layer._get_layer()
        by_shard: dict[Any, list[tuple[str, bytes]]] = defaultdict(list)
        for group, message in messages:
            channel = loop_layer._get_group_channel_name(group)
            by_shard[loop_layer._get_shard(channel)].append((channel, self.layer.serialize(message)))
        for shard, items in by_shard.items():
            async with shard._lock:
                shard._ensure_redis()
                pipeline = shard._redis.pipeline(transaction=False)
                for channel, payload in items:
                    pipeline.publish(channel, payload)
                await pipeline.execute()


_pipelines: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pipelines] = weakref.WeakKeyDictionary()


async def group_publish(group: str, message: dict[str, Any]) -> None:
    """Send a message to a group; concurrent sends from this loop share round trips."""
    layer = get_channel_layer()
    if not isinstance(layer, RedisPubSubChannelLayer):
        await layer.group_send(group, message)
        return
    loop = asyncio.get_running_loop()
    pipelines = _pipelines.get(loop)
    if pipelines is None or pipelines.layer is not layer:
        pipelines = _pipelines[loop] = _Pipelines(layer)
    await pipelines.send(group, message)
