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

import json

from flarebot.core.database import db
from flarebot.core.sessions import OWNER_SOCKETS_GROUP, session_group
from flarebot.core.sockets import CLOSE_SESSION_EXPIRED, OwnerSocket, owner_handshake_check, refuse, session_is_valid
from tasks.events import TASKS_SOCKETS_GROUP, TasksChanged


class TasksConsumer(OwnerSocket):
    async def connect(self) -> None:
        handshake = await db(owner_handshake_check)(self.scope)
        if handshake.refusal is not None or handshake.session_key is None:
            await refuse(self, handshake.refusal or CLOSE_SESSION_EXPIRED)
            return
        self.session_key = handshake.session_key
        await self.subscribe([TASKS_SOCKETS_GROUP, session_group(self.session_key), OWNER_SOCKETS_GROUP])
        if not await session_is_valid(self.session_key):
            await self.refuse_subscribed(CLOSE_SESSION_EXPIRED)
            return
        await self.admit(handshake.expires_at)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Frames from the page change nothing here."""

    async def tasks_changed(self, message: TasksChanged) -> None:
        if self.admitted:
            await self.send(text_data=json.dumps({"type": "tasks_changed"}))
