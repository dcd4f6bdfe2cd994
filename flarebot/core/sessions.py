"""The owner's session: what makes it valid, when it expires, and how it ends.

HTTP middleware and the WebSocket handshake both decide through `owner_session_state`,
so a socket is never accepted for a session that HTTP would refuse.
"""

from __future__ import annotations

import enum
import hashlib
from datetime import datetime
from typing import Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest
from django.utils import timezone

from flarebot.core.installation import user_is_owner
from flarebot.core.models import Installation

AUTH_AT_KEY = "flarebot_auth_at"
INSTALLATION_KEY = "flarebot_installation"


class SessionEnded(TypedDict):
    """Sent to a session's group on sign-out: its sockets close with 4001."""

    type: Literal["session.ended"]


class SessionState(enum.Enum):
    VALID = "valid"
    ABSENT = "absent"
    EXPIRED = "expired"
    NOT_OWNER = "not_owner"


def session_cookie_count(cookie_header: str) -> int:
    """Count how many times the session cookie appears in a raw Cookie header."""
    name = settings.SESSION_COOKIE_NAME
    return sum(1 for part in cookie_header.split(";") if part.strip().split("=", 1)[0].strip() == name)


def owner_session_expires_at(session: SessionBase) -> datetime | None:
    """Return when this session stops being valid: 8 hours after sign-in at the latest."""
    auth_at = session.get(AUTH_AT_KEY)
    if not isinstance(auth_at, (int, float)):
        return None
    absolute = datetime.fromtimestamp(auth_at, tz=timezone.get_current_timezone()) + settings.FLAREBOT_SESSION_LIFETIME
    return min(absolute, session.get_expiry_date())


def owner_session_state(*, session: SessionBase, user: object, installation: Installation) -> SessionState:
    """Classify the session of a request or socket handshake."""
    if not getattr(user, "is_authenticated", False):
        return SessionState.ABSENT
    expires_at = owner_session_expires_at(session)
    if expires_at is None or expires_at <= timezone.now():
        return SessionState.EXPIRED
    if session.get(INSTALLATION_KEY) != str(installation.installation_id):
        return SessionState.NOT_OWNER
    if not user_is_owner(user=user, installation=installation):  # type: ignore[arg-type]
        return SessionState.NOT_OWNER
    return SessionState.VALID


def owner_session_start(*, request: HttpRequest, installation: Installation, user: AbstractBaseUser) -> None:
    """Sign the owner in: a new session key, stamped with sign-in time and installation."""
    # `user` is the instance authenticate() returned: when it just upgraded the password
    # hash, only that instance carries the hash the session's auth hash must match.
    login(request, user)  # type: ignore[arg-type]  # the auth user model here is User
    request.session[AUTH_AT_KEY] = timezone.now().timestamp()
    request.session[INSTALLATION_KEY] = str(installation.installation_id)
    request.session.set_expiry(settings.FLAREBOT_SESSION_LIFETIME)


def session_group(session_key: str) -> str:
    """Return the Channels group of every socket opened with this session."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


def owner_session_end(*, request: HttpRequest) -> None:
    """Sign out and close every socket that was opened with this session (4001)."""
    session_key = request.session.session_key
    logout(request)
    if session_key:
        async_to_sync(get_channel_layer().group_send)(session_group(session_key), SessionEnded(type="session.ended"))
