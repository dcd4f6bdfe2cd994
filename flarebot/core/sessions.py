"""The owner's session: what makes it valid, when it expires, and how it ends.

HTTP middleware and the WebSocket handshake both decide through `owner_session_state`,
so a socket is never accepted for a session that HTTP would refuse; an open socket asks
`owner_session_recheck` (the same rule, from the stored session) before it acts on any
frame. Every way a session ends reaches its open sockets at once: a sign-out (any
`logout()`: /logout/, the admin's, an expired session's) tells the session's group, and
any change to the owner's row or the installation (a new password, a renamed or
deactivated owner) tells every socket to re-check.
"""

from __future__ import annotations

import enum
import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, login, logout
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.auth.signals import user_logged_out
from django.contrib.sessions.backends.base import SessionBase
from django.contrib.sessions.backends.db import SessionStore
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from flarebot.core import sql
from flarebot.core.installation import installation_verified, user_is_owner
from flarebot.core.models import Installation

logger = logging.getLogger(__name__)

AUTH_AT_KEY = "flarebot_auth_at"
INSTALLATION_KEY = "flarebot_installation"
# Every open conversation socket: all of them are the owner's.
OWNER_SOCKETS_GROUP = "owner-sockets"


class SessionEnded(TypedDict):
    """Sent to a session's group on sign-out: its sockets close with 4001."""

    type: Literal["session.ended"]


class SessionRecheck(TypedDict):
    """Sent to every socket when the owner's row or the installation changed: each re-checks its session."""

    type: Literal["session.recheck"]


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
    """Sign out; the session's sockets close with 4001 (see `_session_signed_out`)."""
    logout(request)


def _session_user(session: SessionBase, owner: AbstractBaseUser) -> AbstractBaseUser | AnonymousUser:
    """Return the owner if the session is signed in as the owner, else an anonymous user.

    What `django.contrib.auth.get_user` decides for HTTP, with the owner already at hand
    and without its side effects: a session whose auth hash no longer matches (the
    password changed since) is not the owner's, but is not flushed or re-keyed here, as
    the browser holding its cookie would not learn of a new key.
    """
    if session.get(SESSION_KEY) != owner._meta.pk.value_to_string(owner):
        return AnonymousUser()
    if session.get(BACKEND_SESSION_KEY) not in settings.AUTHENTICATION_BACKENDS:
        return AnonymousUser()
    stored = session.get(HASH_SESSION_KEY)
    hashes = [owner.get_session_auth_hash(), *owner.get_session_auth_fallback_hash()]
    if not isinstance(stored, str) or not any(constant_time_compare(stored, h) for h in hashes):
        return AnonymousUser()
    return owner


class _ReadSession(SessionStore):
    """A database session whose row was read already, with the installation's (one statement)."""

    def __init__(self, session_key: str, session_data: str | None) -> None:
        super().__init__(session_key=session_key)
        self._read_data = session_data

    def load(self) -> dict[str, Any]:
        # As the database backend loads: nothing for a deleted or expired row. Decoded by
        # the backend's own class, whose name is in the signature's salt.
        return {} if self._read_data is None else SessionStore().decode(self._read_data)


@dataclass(frozen=True)
class _Held:
    """A session found valid, from exactly these rows, until a time."""

    rows: tuple[sql.Row, ...]
    until: datetime


# By session key: what each open socket's last check found. A socket checks before every
# frame, and between two frames the rows rarely change, so deciding again from the same
# rows (decoding and verifying the session) is skipped while they are equal.
_held: dict[str, _Held] = {}
_HELD_MAX = 256


def owner_session_recheck(*, session_key: str) -> SessionState:
    """Classify a stored session now, as a request bringing its cookie would be (one query).

    The verdict depends only on the rows read and the time: a session found valid holds
    while the same rows come back, until the moment it was found to expire.
    """
    now = timezone.now()
    rows = sql.owner_session_rows(session_key=session_key, now=now)
    held = _held.get(session_key)
    if held is not None and held.rows == rows and now < held.until:
        return SessionState.VALID
    state, until = _session_state_of(session_key, rows)
    if state is SessionState.VALID and until is not None:
        if len(_held) >= _HELD_MAX:
            _held.clear()
        _held[session_key] = _Held(rows, until)
    else:
        _held.pop(session_key, None)
    return state


def _session_state_of(session_key: str, rows: tuple[sql.Row, ...]) -> tuple[SessionState, datetime | None]:
    read = sql.owner_session_from_rows(rows)
    installation = installation_verified(read.installations)
    if installation is None:
        return SessionState.NOT_OWNER, None
    store = _ReadSession(session_key, read.session_data)
    # A session that loads as nothing is anonymous.
    user = _session_user(store, installation.owner)
    state = owner_session_state(session=store, user=user, installation=installation)
    return state, owner_session_expires_at(store)


def _group_send(group: str, message: SessionEnded | SessionRecheck) -> None:
    try:
        async_to_sync(get_channel_layer().group_send)(group, message)
    except Exception:
        # Sockets re-check their session before acting on any frame, so one that missed
        # this still acts on nothing; it closes then, or when its session's time is up.
        logger.warning("could not tell open sockets that a session ended", exc_info=True)


@receiver(user_logged_out, dispatch_uid="flarebot.sessions.signed_out")
def _session_signed_out(sender: Any, request: HttpRequest | None, **kwargs: Any) -> None:
    session_key = request.session.session_key if request is not None else None
    if session_key:
        _group_send(session_group(session_key), SessionEnded(type="session.ended"))


def owner_sockets_recheck() -> None:
    """Have every open socket re-check its session once the current transaction commits."""
    transaction.on_commit(lambda: _group_send(OWNER_SOCKETS_GROUP, SessionRecheck(type="session.recheck")))


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="flarebot.sessions.user_saved")
@receiver(post_save, sender=Installation, dispatch_uid="flarebot.sessions.installation_saved")
def _owner_row_saved(sender: Any, created: bool, update_fields: frozenset[str] | None, **kwargs: Any) -> None:
    # A new row has no sockets yet, and a sign-in's last_login stamp changes nothing a
    # session depends on.
    if not created and update_fields != frozenset({"last_login"}):
        owner_sockets_recheck()


@receiver(post_delete, sender=settings.AUTH_USER_MODEL, dispatch_uid="flarebot.sessions.user_deleted")
@receiver(post_delete, sender=Installation, dispatch_uid="flarebot.sessions.installation_deleted")
def _owner_row_deleted(sender: Any, **kwargs: Any) -> None:
    owner_sockets_recheck()
