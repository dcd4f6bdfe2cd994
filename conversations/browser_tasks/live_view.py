"""The sign-in handoff's live view: screenshots out, the owner's clicks and keys in, only while the point is open.

It runs in the worker that keeps the task's context, on its engine loop. Pictures go to
the conversation's group as `browser.frame` messages (the sockets send them as
`{"type": "frame"}` frames without a sequence: never stored, never replayed), a few a
second while the page changes and every `REPEAT` seconds anyway, so a page opened later
gets a picture too. Input arrives through the task's input group (`browser_input_group`),
sent there by a socket that checked the point is open; it is applied only if it names
this point, and nothing of it is logged, stored or shown to the model. The view ends when
the point is no longer open, the context closes, or the task resumes here.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from contextlib import suppress
from typing import Any

from channels.layers import get_channel_layer

from conversations.events import BrowserFrame, browser_input_group, conversation_group
from conversations.models import CriticalPoint, CriticalPointState
from conversations.publisher import group_publish
from flarebot.core.database import db
from tools.browser_tasks.inputs import VIEWPORT, owner_input_problem
from tools.browser_tasks.session import BrowserSession, owner_input_apply

logger = logging.getLogger(__name__)

FRAME_INTERVAL = 0.35
REPEAT = 2.0
CHECK_EVERY = 1.0

_views: dict[uuid.UUID, asyncio.Task[None]] = {}


def _point_open(point_id: uuid.UUID) -> bool:
    return CriticalPoint.objects.filter(id=point_id, state=CriticalPointState.OPEN).exists()


def live_view_start(session: BrowserSession, *, conversation_id: uuid.UUID, critical_point_id: uuid.UUID) -> None:
    """Start showing a paused task's page to the owner (on this loop) while its sign-in point is open."""
    live_view_stop(session.task_id)
    task = asyncio.get_running_loop().create_task(_run(session, conversation_id, critical_point_id))
    _views[session.task_id] = task
    task.add_done_callback(
        lambda done: _views.pop(session.task_id, None) if _views.get(session.task_id) is done else None
    )


def live_view_stop(task_id: uuid.UUID) -> None:
    view = _views.pop(task_id, None)
    if view is not None:
        view.cancel()


async def _run(session: BrowserSession, conversation_id: uuid.UUID, point_id: uuid.UUID) -> None:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    group = browser_input_group(session.task_id)
    await layer.group_add(group, channel)
    inputs = asyncio.get_running_loop().create_task(_inputs(session, layer, channel, point_id))
    try:
        last_image = ""
        last_sent = last_check = 0.0
        while not session.closed and not inputs.done():
            now = time.monotonic()
            if now - last_check >= CHECK_EVERY:
                last_check = now
                if not await db(_point_open)(point_id):
                    return
            try:
                image = base64.b64encode(await session.screenshot()).decode("ascii")
            except Exception:
                image = ""
            if image and (image != last_image or now - last_sent >= REPEAT):
                frame = BrowserFrame(
                    type="browser.frame",
                    task_id=str(session.task_id),
                    image=image,
                    width=VIEWPORT["width"],
                    height=VIEWPORT["height"],
                )
                with suppress(Exception):
                    await group_publish(conversation_group(conversation_id), dict(frame))
                last_image, last_sent = image, now
            await asyncio.sleep(FRAME_INTERVAL)
    finally:
        inputs.cancel()
        with suppress(Exception):
            await layer.group_discard(group, channel)


async def _inputs(session: BrowserSession, layer: Any, channel: str, point_id: uuid.UUID) -> None:
    while True:
        message = await layer.receive(channel)
        if message.get("type") != "browser.input" or message.get("critical_point_id") != str(point_id):
            continue
        data = message.get("input")
        if owner_input_problem(data) is not None:
            continue
        try:
            await asyncio.wait_for(owner_input_apply(session, data), 10)
        except Exception:
            logger.info("browser task %s: an input of the owner could not be applied", session.task_id)
