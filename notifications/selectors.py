"""Reads of notifications: destinations as the owner sees them (masked), the settings, the failures."""

from __future__ import annotations

from typing import TypedDict

from flarebot.core.times import iso
from notifications.models import Delivery, DeliveryStatus, Destination, Kind, NotificationSettings
from notifications.services import KINDS, LABEL_MAX, MAX_DESTINATIONS, URL_MAX, settings_get

FAILURES_SHOWN = 20


class DestinationJson(TypedDict):
    id: str
    label: str
    url: str  # masked: the scheme only
    created_at: str | None


class QuietHoursJson(TypedDict):
    enabled: bool
    start: str | None
    end: str | None
    time_zone: str


class FailureJson(TypedDict):
    id: str
    destination_id: str
    destination_label: str
    kind: str
    title: str
    error: str
    attempts: int
    failed_at: str | None


class SettingsJson(TypedDict):
    kinds: dict[str, bool]
    quiet_hours: QuietHoursJson
    failures: list[FailureJson]


class LimitsJson(TypedDict):
    max_destinations: int
    label_max: int
    url_max: int


def destination_view(destination: Destination) -> DestinationJson:
    return {
        "id": str(destination.id),
        "label": destination.label,
        "url": destination.masked,
        "created_at": iso(destination.created_at),
    }


def destination_list() -> list[DestinationJson]:
    return [destination_view(d) for d in Destination.objects.order_by("created_at", "id")]


def limits() -> LimitsJson:
    """The limits a page shows and checks before it asks (the server checks them again)."""
    return {"max_destinations": MAX_DESTINATIONS, "label_max": LABEL_MAX, "url_max": URL_MAX}


def failures_list() -> list[FailureJson]:
    """The latest deliveries that failed for good, newest first."""
    rows = (
        Delivery.objects.filter(status=DeliveryStatus.FAILED)
        .select_related("notification", "destination")
        .order_by("-updated_at", "-id")[:FAILURES_SHOWN]
    )
    return [
        {
            "id": str(row.id),
            "destination_id": str(row.destination_id),
            "destination_label": row.destination.label,
            "kind": row.kind,
            "title": row.notification.title,
            "error": row.error,
            "attempts": row.attempts,
            "failed_at": iso(row.updated_at),
        }
        for row in rows
    ]


def _clock(value: object) -> str | None:
    return value.strftime("%H:%M") if value is not None else None  # type: ignore[attr-defined]


def settings_view(row: NotificationSettings | None = None) -> SettingsJson:
    row = row or settings_get()
    return {
        "kinds": {name: bool(getattr(row, name)) for name in KINDS},
        "quiet_hours": {
            "enabled": row.quiet_enabled,
            "start": _clock(row.quiet_start),
            "end": _clock(row.quiet_end),
            "time_zone": row.quiet_time_zone,
        },
        "failures": failures_list(),
    }


KIND_LABELS = {kind.value: kind.label for kind in Kind}
