"""The conversation socket: authenticate, join the conversation's group, forward frames."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.utils import timezone

from conversations import eventlog, selectors, turns
from conversations.eventlog import EventFrame, EventsPublished
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

T = TypeVar("T")


def _db(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """Run a database function off the event loop, in parallel with other sockets' calls.

    Channels' default runs every socket's database work on one thread per process; a
    burst of messages from many sockets would then queue behind each other.
    """
    return database_sync_to_async(function, thread_sensitive=False)


def _last_sequence_param(scope: dict[str, Any]) -> int:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("last_sequence", ["0"])
    value = values[-1]
    return int(value) if value.isdigit() and len(value) <= 18 else 0


@_db
def _events_after(conversation_id: uuid.UUID, after: int) -> list[EventFrame]:
    return eventlog.event_list_after(conversation_id=conversation_id, after=after)


@_db
def _submit(conversation_id: uuid.UUID, request_id: str, text: str) -> turns.Submitted:
    return turns.turn_submit_unpublished(conversation_id=conversation_id, request_id=uuid.UUID(request_id), text=text)


@_db
def _cancel(conversation_id: uuid.UUID) -> None:
    turns.turn_cancel(conversation_id=conversation_id)


@_db
def _conversation_is_active(conversation_id: uuid.UUID) -> bool:
    return selectors.conversation_get_active(conversation_id=conversation_id) is not None


class ConversationConsumer(AsyncWebsocketConsumer):
    groups: list[str] = []

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Handle a message without Channels' per-message connection clean-up.

        Channels hops to its single sync thread before every handler to close stale
        database connections; for a socket that means one hop per streamed window, and
        every socket's windows queued on that one thread. This consumer's database calls
        go through `database_sync_to_async`, which does that clean-up itself.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        handshake = await _db(owner_handshake_check)(self.scope)
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
        # Group messages that arrive during the replay wait in this consumer's queue and
        # are handled after it, deduplicated by sequence.
        self.last_sent = _last_sequence_param(self.scope)
        await self._catch_up(until=None)

    async def _catch_up(self, *, until: int | None) -> None:
        """Send stored events after the last one sent (up to `until`), page by page."""
        while until is None or self.last_sent < until:
            frames = await _events_after(self.conversation_id, self.last_sent)
            for frame in frames:
                if until is not None and frame["sequence"] > until:
                    return
                await self.send(text_data=json.dumps(frame))
                self.last_sent = frame["sequence"]
            if len(frames) < eventlog.PAGE_SIZE:
                return

    async def events_published(self, message: EventsPublished) -> None:
        for frame in message["frames"]:
            sequence = frame["sequence"]
            if sequence <= self.last_sent:
                continue
            if sequence > self.last_sent + 1:
                await self._catch_up(until=sequence - 1)
            await self.send(text_data=json.dumps(frame))
            self.last_sent = sequence

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
            if frame["type"] == "user_message":
                submitted = await _submit(self.conversation_id, frame["request_id"], frame["text"])
                ack = {"type": "ack", "request_id": frame["request_id"].lower(), "turn_id": str(submitted.turn.id)}
                await self.send(text_data=json.dumps(ack))
                # Published from this loop: a thread hopping back here would wait on it.
                await eventlog.events_publish(conversation_id=self.conversation_id, frames=submitted.frames)
            elif frame["type"] == "cancel_agent":
                await _cancel(self.conversation_id)
            else:
                raise Unavailable("No browser task is waiting for an answer.", code="no_critical_point")
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
