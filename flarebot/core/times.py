"""Timestamps as the contract writes them."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(value: datetime | None) -> str | None:
    """Format a datetime as ISO-8601 UTC with milliseconds and `Z`."""
    if value is None:
        return None
    utc = value.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
