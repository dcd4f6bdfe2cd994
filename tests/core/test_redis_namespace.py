"""Two instances on one Redis server, each with its own database, never hear each other.

Pub/sub channels are server-wide in Redis: without a namespace per database, a group
message of one instance (or test stack) reached the sockets of another, which closed them
on a message type they did not know.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer

from flarebot.core.env import redis_namespace

SERVER = "redis://127.0.0.1:6379"


@pytest.mark.parametrize(
    ("url", "namespace"),
    [
        ("redis://127.0.0.1:6379", "flarebot:0"),
        ("redis://127.0.0.1:6379/0", "flarebot:0"),
        ("redis://127.0.0.1:6379/3", "flarebot:3"),
        ("redis://:secret@127.0.0.1:6379/15", "flarebot:15"),
        ("unix:///run/redis.sock", "flarebot:0"),
    ],
)
def test_the_namespace_names_the_database(url, namespace):
    assert redis_namespace(url) == namespace


async def test_a_group_message_reaches_only_the_instance_on_the_same_database():
    ours = RedisPubSubChannelLayer(hosts=[f"{SERVER}/1"], prefix=redis_namespace(f"{SERVER}/1"))
    theirs = RedisPubSubChannelLayer(hosts=[f"{SERVER}/2"], prefix=redis_namespace(f"{SERVER}/2"))
    same = RedisPubSubChannelLayer(hosts=[f"{SERVER}/1"], prefix=redis_namespace(f"{SERVER}/1"))
    try:
        group = f"owner-{uuid.uuid4().hex}"  # no other run on this server sends to it
        channel = await ours.new_channel()
        await ours.group_add(group, channel)
        await asyncio.sleep(0.2)  # the subscription is made

        await theirs.group_send(group, {"type": "owner.changed", "from": "another instance"})
        await same.group_send(group, {"type": "owner.changed", "from": "this instance"})

        received = await asyncio.wait_for(ours.receive(channel), timeout=30)
        assert received["from"] == "this instance"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(ours.receive(channel), timeout=0.5)
    finally:
        for layer in (ours, theirs, same):
            await layer.flush()
