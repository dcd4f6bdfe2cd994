"""The one error tree of Flarebot, mapped to the contract's error shape at the edges.

Messages are shown to a person: short, actionable, never a secret or an upstream body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class FlarebotError(Exception):
    """Base of every error Flarebot reports to a client."""

    status = 400
    code = "invalid"
    default_message = "The request is not valid."

    def __init__(
        self, message: str | None = None, *, code: str | None = None, extra: Mapping[str, Any] | None = None
    ) -> None:
        self.message = (message or self.default_message)[:500]
        if code is not None:
            self.code = code
        # Fields the error object carries beside code and message (an addition to the
        # contract's shape, e.g. the current state of what a stale request conflicted with).
        self.extra: dict[str, Any] = dict(extra or {})
        super().__init__(self.message)


class InvalidInput(FlarebotError):
    """The request carries a value outside the contract."""


class NotAuthenticated(FlarebotError):
    """No valid owner session came with the request."""

    status = 401
    code = "not_authenticated"
    default_message = "Sign in to continue."


class Forbidden(FlarebotError):
    """The caller is authenticated but may not do this."""

    status = 403
    code = "forbidden"
    default_message = "This request is refused."


class NotFound(FlarebotError):
    """The thing asked for does not exist, or no longer does."""

    status = 404
    code = "not_found"
    default_message = "Not found."


class Conflict(FlarebotError):
    """The request is based on a stale version or reuses an id differently."""

    status = 409
    code = "conflict"
    default_message = "This was changed elsewhere; reload and try again."


class TooLarge(FlarebotError):
    """The request body is larger than Flarebot accepts."""

    status = 413
    code = "too_large"
    default_message = "The request is too large."


class LimitReached(FlarebotError):
    """A rate or count limit stops this request."""

    status = 429
    code = "limit_reached"
    default_message = "Limit reached; try again later."


class Unavailable(FlarebotError):
    """The installation cannot serve private data right now."""

    status = 503
    code = "unavailable"
    default_message = "Flarebot is not available."


def error_body(code: str, message: str, extra: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Return the contract's error shape, with any extra fields after code and message."""
    return {"error": {"code": code, "message": message, **(extra or {})}}
