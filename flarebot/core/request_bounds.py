"""How large a request's body may be, decided before the web process holds any more of it.

daphne (Twisted) reads a request's whole body before the application runs, then queues all
of it for the application, so a limit in Django or in ASGI acts only once the process holds
the body, whatever its size. The web process (`flarebot.web_bounds.BoundedRequest`) asks a
`BodyGuard` instead: on the declared `Content-Length` as the headers end, and on the bytes
of a chunked body as they arrive. A body it refuses is answered at once, and the connection
is closed without reading the rest.

Every route takes at most Django's own `DATA_UPLOAD_MAX_MEMORY_SIZE`; a route that takes
more says so where it is routed, with `body_max` (the attachment upload).

Past that default, what the request boundary (`flarebot.core.middleware`) decides from the
request line and headers alone comes first, so a client that may not send anything is told
that, and can make the process hold no more than the default: a foreign Origin, or none on
an unsafe method (403 `origin_refused`), and under /api/ a session cookie missing or sent
twice (401). Whether the installation is verified and the session still valid needs the
database, which this layer never waits for: the middleware decides those, on a body within
its bound.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, TypeVar

from django.conf import settings
from django.urls import Resolver404, resolve

from flarebot.core.errors import TooLarge, error_body
from flarebot.core.middleware import (
    API_PREFIX,
    DUPLICATE_COOKIE_MESSAGE,
    ORIGIN_REFUSED_MESSAGE,
    SIGN_IN_MESSAGE,
    origin_refused,
)
from flarebot.core.sessions import session_cookie_count

View = TypeVar("View", bound=Callable[..., Any])
BOUND_ATTRIBUTE = "flarebot_body_bound"


@dataclass(frozen=True)
class RouteBound:
    """The most bytes a route's body may have, and what a person is told past it."""

    limit: int
    message: str


@dataclass(frozen=True)
class Refusal:
    """An answer given before the body is read."""

    status: int
    code: str
    message: str


def body_max(limit: int, message: str) -> Callable[[View], View]:
    """Let a routed view take a body of up to `limit` bytes instead of the default."""

    def bound(view: View) -> View:
        setattr(view, BOUND_ATTRIBUTE, RouteBound(limit, message))
        return view

    return bound


def default_limit() -> int:
    """Return the bound of every route that names none: Django's own for a body it reads."""
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def route_bound(path: str) -> RouteBound:
    """Return the body bound of the view routed at `path`, the default for any other path."""
    try:
        view = resolve(path).func
    except Resolver404:
        view = None
    bound = getattr(view, BOUND_ATTRIBUTE, None)
    return bound if isinstance(bound, RouteBound) else RouteBound(default_limit(), TooLarge.default_message)


def header_refusal(*, path: str, method: str, origin: str | None, cookie: str) -> Refusal | None:
    """Return what the request boundary refuses on the request line and headers alone, in its order."""
    if origin_refused(path=path, method=method, origin=origin):
        return Refusal(403, "origin_refused", ORIGIN_REFUSED_MESSAGE)
    if path.startswith(API_PREFIX):
        cookies = session_cookie_count(cookie)
        if cookies > 1:
            return Refusal(401, "duplicate_cookie", DUPLICATE_COOKIE_MESSAGE)
        if cookies == 0:
            return Refusal(401, "not_authenticated", SIGN_IN_MESSAGE)
    return None


class BodyGuard:
    """One request's body as it grows: what refuses it at each size, decided once it passes the default."""

    def __init__(self, *, path: str, method: str, origin: str | None, cookie: str) -> None:
        self.path = path
        self.method = method
        self.origin = origin
        self.cookie = cookie
        self._decided: tuple[Refusal | None, RouteBound] | None = None

    def refusal(self, size: int) -> Refusal | None:
        """Return the answer to a body that has reached `size` bytes, None while it may go on."""
        if size <= default_limit():
            return None
        if self._decided is None:
            refused = header_refusal(path=self.path, method=self.method, origin=self.origin, cookie=self.cookie)
            self._decided = (refused, route_bound(self.path))
        refused, bound = self._decided
        if refused is not None:
            return refused
        return Refusal(TooLarge.status, TooLarge.code, bound.message) if size > bound.limit else None


def refusal_response(refusal: Refusal, *, path: str) -> bytes:
    """Return the whole HTTP response of a refusal: the contract's error shape under /api/, plain text elsewhere."""
    if path.startswith(API_PREFIX):
        body = json.dumps(error_body(refusal.code, refusal.message)).encode()
        content_type = "application/json"
    else:
        body = refusal.message.encode()
        content_type = "text/plain; charset=utf-8"
    head = [
        f"HTTP/1.1 {refusal.status} {HTTPStatus(refusal.status).phrase}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        "Connection: close",
    ]
    return "".join(f"{line}\r\n" for line in head).encode("ascii") + b"\r\n" + body
