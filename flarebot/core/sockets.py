"""What every WebSocket consumer shares: the handshake checks, close codes, error frames."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from flarebot.core.errors import FlarebotError
from flarebot.core.installation import installation_get_verified
from flarebot.core.sessions import SessionState, owner_session_expires_at, owner_session_state, session_cookie_count

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
