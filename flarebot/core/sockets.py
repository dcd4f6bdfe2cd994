"""What every WebSocket consumer shares: the handshake checks, close codes, error frames,
and an owner's socket's life (`OwnerSocket`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.utils import timezone

from flarebot.core.database import db
from flarebot.core.errors import FlarebotError
from flarebot.core.installation import installation_get_verified
from flarebot.core.sessions import (
    SessionState,
    owner_session_expires_at,
    owner_session_recheck,
    owner_session_state,
    session_cookie_count,
)

CLOSE_SESSION_EXPIRED = 4001
CLOSE_REFUSED = 4003
CLOSE_NOT_FOUND = 4004
# A handshake whose query is malformed (after an error frame saying what). Not the standard
# 1008: a server may send only 1000 and 3000-4999 (RFC 6455 7.4.2 as autobahn, under
# daphne, enforces it; 1008 ended the socket with 1011 and a traceback).
CLOSE_INVALID_REQUEST = 4400


class ErrorFrame(TypedDict):
    type: Literal["error"]
    code: str
    message: str


def error_frame(error: FlarebotError) -> ErrorFrame:
    """Return the socket's error frame for a Flarebot error."""
    return ErrorFrame(type="error", code=error.code, message=error.message)


@dataclass(frozen=True)
class Handshake:
    """The outcome of checking a socket handshake: a close code, or the session's expiry."""

    refusal: int | None
    expires_at: datetime | None = None
    session_key: str | None = None


def _header(scope: dict[str, Any], name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers", []) if key.lower() == name]


def owner_handshake_check(scope: dict[str, Any]) -> Handshake:
    """Check origin, cookie, installation and owner session of a socket (sync: touches the DB)."""
    origins = _header(scope, b"origin")
    if origins != [settings.FLAREBOT_ORIGIN]:
        return Handshake(refusal=CLOSE_REFUSED)
    if sum(session_cookie_count(value) for value in _header(scope, b"cookie")) > 1:
        return Handshake(refusal=CLOSE_REFUSED)
    installation = installation_get_verified()
    if installation is None:
        return Handshake(refusal=CLOSE_REFUSED)
    session = scope["session"]
    user = scope["user"]
    state = owner_session_state(session=session, user=user, installation=installation)
    if state is SessionState.NOT_OWNER:
        return Handshake(refusal=CLOSE_REFUSED)
    if state is not SessionState.VALID:
        return Handshake(refusal=CLOSE_SESSION_EXPIRED)
    return Handshake(refusal=None, expires_at=owner_session_expires_at(session), session_key=session.session_key)


async def refuse(consumer: AsyncWebsocketConsumer, code: int) -> None:
    """Refuse a handshake with a close code: accept, then close at once, sending nothing else.

    A browser learns the code only from a socket that was accepted: a close before accept
    is an HTTP 403 to it, and reaches the page as a bare 1006.
    """
    await consumer.accept()
    await consumer.close(code=code)


def _session_is_valid(session_key: str) -> bool:
    return owner_session_recheck(session_key=session_key) is SessionState.VALID


session_is_valid: Callable[[str], Awaitable[bool]] = db(_session_is_valid)


class OwnerSocket(AsyncWebsocketConsumer):
    """An owner's socket: its groups, its admission, and its end with the session.

    A consumer subscribes to its groups before checking its admission again (`subscribe`),
    so that a sign-out or a deletion that commits in between still reaches it as a group
    message; once admitted (`admit`), it closes with 4001 when its session expires, ends
    (`session.ended`) or no longer checks out (`session.recheck`). Messages without a
    handler here are left alone: the owner's group carries some for other sockets.
    """

    admitted = False
    session_key = ""

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Handle a message without Channels' per-message connection clean-up.

        Channels hops to its single sync thread before every handler to close stale
        database connections; for a socket that means one hop per streamed window, and
        every socket's windows queued on that one thread. Database calls here go through
        `flarebot.core.database.db`, whose threads replace a connection that broke.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is not None:
            await handler(message)

    async def subscribe(self, groups: list[str]) -> None:
        self.joined = list(groups)
        for group in self.joined:
            await self.channel_layer.group_add(group, self.channel_name)

    async def admit(self, expires_at: datetime | None) -> None:
        """Accept the socket and close it when its session expires."""
        await self.accept()
        self.admitted = True
        self.expiry_task = asyncio.create_task(self._close_at(expires_at or timezone.now()))

    async def refuse_subscribed(self, code: int) -> None:
        await self._leave_groups()
        await refuse(self, code)

    async def _close_at(self, expires_at: datetime) -> None:
        await asyncio.sleep(max(0.0, (expires_at - timezone.now()).total_seconds()))
        await self._end(CLOSE_SESSION_EXPIRED)

    async def _end(self, code: int) -> None:
        """Close an admitted socket; nothing it still receives is acted on."""
        if self.admitted:
            self.admitted = False
            await self.close(code=code)

    async def _leave_groups(self) -> None:
        joined, self.joined = getattr(self, "joined", []), []
        for group in joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        self.admitted = False
        task = getattr(self, "expiry_task", None)
        if task is not None:
            task.cancel()
        await self._leave_groups()

    async def session_ended(self, message: dict[str, Any]) -> None:
        await self._end(CLOSE_SESSION_EXPIRED)

    async def session_recheck(self, message: dict[str, Any]) -> None:
        if self.admitted and not await session_is_valid(self.session_key):
            await self._end(CLOSE_SESSION_EXPIRED)
