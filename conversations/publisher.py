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
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer

from flarebot.core.batching import UNBOUNDED, BatchedCalls
from flarebot.core.loops import PerLoop


class _Pipelines:
    """The publishes of one event loop: one pipeline per shard in flight at a time."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self._calls: BatchedCalls[tuple[str, dict[str, Any]], None] = BatchedCalls(
            self._publish, in_flight=1, batch=UNBOUNDED
        )

    async def send(self, group: str, message: dict[str, Any]) -> None:
        await self._calls.call((group, message))

    async def _publish(self, messages: Sequence[tuple[str, dict[str, Any]]]) -> list[None]:
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
        return [None] * len(messages)


_pipelines: PerLoop[_Pipelines] = PerLoop(lambda: _Pipelines(get_channel_layer()))


async def group_publish(group: str, message: dict[str, Any]) -> None:
    """Send a message to a group; concurrent sends from this loop share round trips."""
    layer = get_channel_layer()
    if not isinstance(layer, RedisPubSubChannelLayer):
        await layer.group_send(group, message)
        return
    pipelines = _pipelines.get()
    if pipelines.layer is not layer:  # the layer was replaced (a test's settings)
        pipelines = _Pipelines(layer)
        _pipelines.install(asyncio.get_running_loop(), pipelines)
    await pipelines.send(group, message)
