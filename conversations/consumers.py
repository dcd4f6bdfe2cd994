"""The conversation socket: authenticate, join the conversation's group, forward frames."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.utils import timezone

from conversations import selectors
from conversations.events import conversation_group
from conversations.frames import parse_client_frame
from flarebot.core.errors import FlarebotError, Unavailable
from flarebot.core.sessions import session_group
from flarebot.core.sockets import (
    CLOSE_NOT_FOUND,
    CLOSE_SESSION_EXPIRED,
    error_frame,
    owner_handshake_check,
)


@database_sync_to_async
def _conversation_is_active(conversation_id: uuid.UUID) -> bool:
    return selectors.conversation_get_active(conversation_id=conversation_id) is not None


class ConversationConsumer(AsyncWebsocketConsumer):
    groups: list[str] = []

    async def connect(self) -> None:
        handshake = await database_sync_to_async(owner_handshake_check)(self.scope)
        if handshake.refusal is not None:
            await self.close(code=handshake.refusal)
            return
        try:
            self.conversation_id = uuid.UUID(self.scope["url_route"]["kwargs"]["conversation_id"])
        except ValueError:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        # Subscribe before checking the conversation, so a deletion that commits in
        # between is still seen as the group's `conversation.deleted` message.
        self.joined = [conversation_group(self.conversation_id), session_group(handshake.session_key or "")]
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)
        if not await _conversation_is_active(self.conversation_id):
            await self.disconnect(CLOSE_NOT_FOUND)
            await self.close(code=CLOSE_NOT_FOUND)
            return
        await self.accept()
        self.expiry_task = asyncio.create_task(self._close_at(handshake.expires_at))

    async def _close_at(self, expires_at: Any) -> None:
        await asyncio.sleep(max(0.0, (expires_at - timezone.now()).total_seconds()))
        await self.close(code=CLOSE_SESSION_EXPIRED)

    async def disconnect(self, code: int) -> None:
        task = getattr(self, "expiry_task", None)
        if task is not None:
            task.cancel()
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            frame = parse_client_frame(text_data, bytes_data)
            raise Unavailable(f"{frame['type']} is not handled by this version of Flarebot.", code="not_supported")
        except FlarebotError as error:
            await self.send(text_data=json.dumps(error_frame(error)))

    async def conversation_deleted(self, message: dict[str, Any]) -> None:
        await self.close(code=CLOSE_NOT_FOUND)

    async def session_ended(self, message: dict[str, Any]) -> None:
        await self.close(code=CLOSE_SESSION_EXPIRED)


class UnknownRouteConsumer(AsyncWebsocketConsumer):
    """Refuse sockets on any path that is not a conversation."""

    async def connect(self) -> None:
        await self.close(code=CLOSE_NOT_FOUND)
