"""The Tasks socket (`/ws/tasks/`): tells the Settings page when its tasks may have changed.

A run that started, moved on or ended, a fire that armed the next occurrence, a task made,
changed or deleted anywhere (another tab, the chat's task tools): each sends `tasks.changed`
to this socket's group after commit (`tasks.events.tasks_changed_send`), and the socket
passes it on as a `tasks_changed` frame without data; the page reads its tasks again. Nothing
is stored or replayed: a page reads them again whenever its socket comes back.

Admission and session checks are the conversation socket's (`flarebot.core.sockets`): a
refused handshake is accepted and closed at once with 4001 or 4003, and an admitted socket
closes with 4001 as soon as its session ends. The socket takes no frames.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.utils import timezone

from flarebot.core.database import db
from flarebot.core.sessions import OWNER_SOCKETS_GROUP, SessionState, owner_session_recheck, session_group
from flarebot.core.sockets import CLOSE_SESSION_EXPIRED, owner_handshake_check, refuse
from tasks.events import TASKS_SOCKETS_GROUP, TasksChanged


@db
def _session_is_valid(session_key: str) -> bool:
    return owner_session_recheck(session_key=session_key) is SessionState.VALID


class TasksConsumer(AsyncWebsocketConsumer):
    async def dispatch(self, message: dict[str, Any]) -> None:
        """Handle this socket's messages; the owner's group carries others (`owner.changed`), left alone."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is not None:
            await handler(message)

    async def connect(self) -> None:
        self.admitted = False
        self.joined: list[str] = []
        handshake = await db(owner_handshake_check)(self.scope)
        if handshake.refusal is not None or handshake.session_key is None:
            await refuse(self, handshake.refusal or CLOSE_SESSION_EXPIRED)
            return
        self.session_key = handshake.session_key
        # Subscribe before checking again, so that a sign-out that commits in between still
        # reaches this socket as its group's message.
        self.joined = [TASKS_SOCKETS_GROUP, session_group(self.session_key), OWNER_SOCKETS_GROUP]
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        if not await _session_is_valid(self.session_key):
            await self._leave_groups()
            await refuse(self, CLOSE_SESSION_EXPIRED)
            return
        await self.accept()
        self.admitted = True
        expires_at = handshake.expires_at or timezone.now()
        self.expiry_task = asyncio.create_task(self._close_at(expires_at))

    async def _close_at(self, expires_at: Any) -> None:
        await asyncio.sleep(max(0.0, (expires_at - timezone.now()).total_seconds()))
        await self._end()

    async def _end(self) -> None:
        if self.admitted:
            self.admitted = False
            await self.close(code=CLOSE_SESSION_EXPIRED)

    async def _leave_groups(self) -> None:
        joined, self.joined = self.joined, []
        for group in joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        self.admitted = False
        task = getattr(self, "expiry_task", None)
        if task is not None:
            task.cancel()
        await self._leave_groups()

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Frames from the page change nothing here."""

    async def tasks_changed(self, message: TasksChanged) -> None:
        if self.admitted:
            await self.send(text_data=json.dumps({"type": "tasks_changed"}))

    async def session_ended(self, message: dict[str, Any]) -> None:
        await self._end()

    async def session_recheck(self, message: dict[str, Any]) -> None:
        if self.admitted and not await _session_is_valid(self.session_key):
            await self._end()
