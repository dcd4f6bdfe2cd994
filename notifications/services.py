"""Writes of notifications: destinations, settings, and recording what events tell.

- Recording runs inside the transaction that stores the events (`events_stored`), so a
  notification exists exactly when its event does; its deliveries' job is enqueued after
  commit with only the destination's id. Sending them is `delivery.py`.
- Quiet hours (in their own time zone) hold every kind but "needs an answer"; when they
  end, everything they held goes to each destination as one summary. What they hold
  follows the settings: saved quiet hours that end earlier (or are off, or no longer
  cover now) release it at their new end.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from celery import current_app
from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone

from flarebot.core.crypto import DecryptionFailed, Secret, seal, unseal
from flarebot.core.errors import InvalidInput
from flarebot.core.installation import installation_get_verified
from flarebot.core.rows import transaction_lock
from flarebot.core.text import has_control_characters, has_disguising_characters, has_lone_surrogates
from notifications.errors import (
    DestinationInvalid,
    DestinationNotFound,
    DestinationsFull,
    DestinationUnreadable,
    SettingsInvalid,
)
from notifications.messages import TELLING, Told, one_line, told_of
from notifications.models import Delivery, DeliveryStatus, Destination, Kind, Notification, NotificationSettings
from notifications.transport import Message, TransportError, message_send, url_masked, url_parses
from tasks.models import Task
from tasks.schedule import zone, zone_parse

logger = logging.getLogger(__name__)

MAX_DESTINATIONS = 10
LABEL_MAX = 60
URL_MAX = 1000
SEND_JOB = "notifications.jobs.destination_deliver"
DESTINATIONS_ADD_LOCK = "notifications:destinations-add"
KINDS = tuple(Kind.values)


# Destinations


def _installation_id() -> uuid.UUID:
    installation = installation_get_verified()
    if installation is None:
        raise InvalidInput("Flarebot has no owner installation.", code="installation_unavailable")
    return installation.installation_id


def destination_create(*, url: Any, label: Any) -> Destination:
    """Add a destination (an Apprise URL, sealed at rest) under the limit, or refuse and change nothing."""
    if not isinstance(label, str):
        raise DestinationInvalid("The label must be a string.", field="label")
    if not isinstance(url, str):
        raise DestinationInvalid("The URL must be a string.", field="url")
    label = label.strip()
    if not 1 <= len(label) <= LABEL_MAX:
        raise DestinationInvalid(f"The label must be 1-{LABEL_MAX} characters long.", field="label")
    if has_control_characters(label) or has_disguising_characters(label) or has_lone_surrogates(label):
        raise DestinationInvalid("The label must not contain control or invisible characters.", field="label")
    url = url.strip()
    if not 1 <= len(url) <= URL_MAX:
        raise DestinationInvalid(f"The URL must be 1-{URL_MAX} characters long.", field="url")
    if has_control_characters(url) or has_lone_surrogates(url) or any(c.isspace() for c in url):
        raise DestinationInvalid("The URL must not contain spaces or control characters.", field="url")
    if not url_parses(url):
        raise DestinationUnreadable(
            "Apprise cannot read this URL: name a service it knows in its URL form, "
            "such as ntfy://host/topic, json://host/path or mailto://user:password@host."
        )
    sealed = seal(url, server_secret=django_settings.SECRET_KEY, installation_id=_installation_id())
    with transaction.atomic():
        transaction_lock(DESTINATIONS_ADD_LOCK)
        if Destination.objects.count() >= MAX_DESTINATIONS:
            raise DestinationsFull(f"There are {MAX_DESTINATIONS} destinations already; delete one to add another.")
        return Destination.objects.create(label=label, sealed=sealed, masked=url_masked(url))


def destination_delete(*, destination_id: uuid.UUID) -> None:
    """Delete a destination and what was still to be sent to it; absent is fine."""
    Destination.objects.filter(id=destination_id).delete()


def destination_url(destination: Destination) -> Secret | None:
    try:
        return unseal(
            bytes(destination.sealed), server_secret=django_settings.SECRET_KEY, installation_id=_installation_id()
        )
    except DecryptionFailed:
        return None


UNREADABLE = "The stored URL can no longer be read (the server secret or the installation changed); add it again."


@dataclass(frozen=True)
class TestOutcome:
    ok: bool
    message: str


def destination_test(*, destination_id: uuid.UUID) -> TestOutcome:
    """Send a test message to a destination now, within the send's time bound, and say how it went."""
    destination = Destination.objects.filter(id=destination_id).first()
    if destination is None:
        raise DestinationNotFound()
    url = destination_url(destination)
    if url is None:
        return TestOutcome(False, UNREADABLE)
    message = Message(
        title="Flarebot test",
        body=f"Notifications reach “{one_line(destination.label)}”.\n{django_settings.FLAREBOT_ORIGIN}/settings/",
    )
    try:
        message_send(url=url, message=message)
    except TransportError as error:
        return TestOutcome(False, error.message)
    return TestOutcome(True, "The destination accepted the test message.")


# Settings


def settings_get() -> NotificationSettings:
    """The settings row, or unsaved defaults."""
    return NotificationSettings.objects.first() or NotificationSettings()


def _clock(raw: Any, field: str) -> time:
    if not isinstance(raw, str) or len(raw) != 5 or raw[2] != ":" or not (raw[:2] + raw[3:]).isdigit():
        raise SettingsInvalid("A time of quiet hours must be HH:MM, such as 22:00.", field=field)
    hour, minute = int(raw[:2]), int(raw[3:])
    if hour > 23 or minute > 59:
        raise SettingsInvalid("A time of quiet hours must be HH:MM from 00:00 to 23:59.", field=field)
    return time(hour, minute)


def settings_update(*, kinds: Any, quiet_hours: Any, now: datetime | None = None) -> NotificationSettings:
    """Replace the kinds and quiet hours; what they hold goes at their new end (now, if outside them)."""
    if not isinstance(kinds, Mapping) or set(kinds) != set(KINDS):
        raise SettingsInvalid(f"The kinds must name exactly {', '.join(KINDS)}.", field="kinds")
    for name in KINDS:
        if type(kinds[name]) is not bool:
            raise SettingsInvalid(f"kinds.{name} must be true or false.", field=f"kinds.{name}")
    if not isinstance(quiet_hours, Mapping) or set(quiet_hours) != {"enabled", "start", "end", "time_zone"}:
        raise SettingsInvalid(
            "The quiet hours must name exactly enabled, start, end and time_zone.", field="quiet_hours"
        )
    enabled = quiet_hours["enabled"]
    if type(enabled) is not bool:
        raise SettingsInvalid("quiet_hours.enabled must be true or false.", field="quiet_hours.enabled")
    start = end = None
    if enabled or quiet_hours["start"] is not None or quiet_hours["end"] is not None:
        start = _clock(quiet_hours["start"], "quiet_hours.start")
        end = _clock(quiet_hours["end"], "quiet_hours.end")
        if start == end:
            raise SettingsInvalid("Quiet hours must end at another time than they start.", field="quiet_hours.end")
    try:
        time_zone = zone_parse(quiet_hours["time_zone"])
    except Exception:
        raise SettingsInvalid(
            "The time zone must be an IANA time zone such as Europe/Berlin or UTC.", field="quiet_hours.time_zone"
        ) from None
    with transaction.atomic():
        row = NotificationSettings.objects.select_for_update().first() or NotificationSettings()
        for name in KINDS:
            setattr(row, name, kinds[name])
        row.quiet_enabled, row.quiet_start, row.quiet_end, row.quiet_time_zone = enabled, start, end, time_zone
        row.save()
        _held_follow(row, now or timezone.now())
    return row


def _held_follow(row: NotificationSettings, now: datetime) -> None:
    """Move what quiet hours hold to the end of the quiet hours `now` falls in, or to now outside them."""
    held = Delivery.objects.filter(status=DeliveryStatus.PENDING, held=True)
    ends = quiet_until(row, now)
    if ends is not None:
        held.exclude(due_at=ends).update(due_at=ends, updated_at=now)
        return
    released = held.filter(due_at__gt=now)
    destinations = set(released.values_list("destination_id", flat=True))
    released.update(due_at=now, updated_at=now)
    if destinations:
        transaction.on_commit(lambda: _enqueue(destinations))


def quiet_until(row: NotificationSettings, now: datetime) -> datetime | None:
    """When the quiet hours `now` falls in end, or None outside them."""
    if not row.quiet_enabled or row.quiet_start is None or row.quiet_end is None:
        return None
    tz = zone(row.quiet_time_zone)
    local = now.astimezone(tz)
    clock = local.time()
    start, end = row.quiet_start, row.quiet_end
    inside = start <= clock < end if start < end else clock >= start or clock < end
    if not inside:
        return None
    ends = datetime.combine(local.date(), end, tzinfo=tz)
    if ends <= local:
        ends = datetime.combine(local.date() + timedelta(days=1), end, tzinfo=tz)
    return ends.astimezone(now.tzinfo)


# Recording


def _wanted(told: Told, row: NotificationSettings) -> bool:
    if getattr(row, told.kind):
        return True
    # "Notify me" on a task: its completed runs are told even when the kind is off.
    return (
        told.kind == Kind.RUN_COMPLETED
        and told.task_id is not None
        and Task.objects.filter(id=told.task_id, notify_on_completion=True).exists()
    )


def notifications_record_events(sender: object, *, rows: Sequence[Mapping[str, Any]], **kwargs: object) -> None:
    """Record what stored events tell the owner, in their transaction (the `events_stored` receiver)."""
    telling = [row for row in rows if row["kind"] in TELLING]
    if not telling:
        return
    try:
        # A savepoint: whatever goes wrong here never undoes the events (or the change they announce).
        with transaction.atomic():
            notifications_record(events=telling)
    except Exception:
        logger.warning("could not record what %d events tell the owner", len(telling), exc_info=True)


def notifications_record(*, events: Iterable[Mapping[str, Any]]) -> list[Notification]:
    """Write the notifications these events tell and their deliveries; enqueue sending after commit."""
    destinations = list(Destination.objects.values_list("id", flat=True))
    if not destinations:
        return []
    row = settings_get()
    now = timezone.now()
    recorded: list[Notification] = []
    for event in events:
        try:
            told = told_of(conversation_id=event["conversation_id"], kind=event["kind"], data=event["data"])
        except (KeyError, TypeError, ValueError):
            logger.warning("event %s of conversation %s has no usable shape", event["kind"], event["conversation_id"])
            continue
        if told is None or not _wanted(told, row) or Notification.objects.filter(key=told.key).exists():
            continue
        notification = Notification.objects.create(
            kind=told.kind,
            key=told.key,
            conversation_id=told.conversation_id,
            title=one_line(told.title, 120),
            summary=one_line(told.summary),
            path=told.path,
            subject=told.subject,
        )
        Delivery.objects.bulk_create(
            Delivery(notification=notification, destination_id=d, kind=told.kind, due_at=now) for d in destinations
        )
        recorded.append(notification)
    if recorded:
        transaction.on_commit(lambda: _enqueue(destinations))
    return recorded


def _enqueue(destination_ids: Iterable[uuid.UUID], *, eta: datetime | None = None) -> None:
    """Ask a worker to deliver to these destinations; the sweep covers a lost message, so this never raises."""
    for destination_id in destination_ids:
        try:
            current_app.send_task(SEND_JOB, args=[str(destination_id)], eta=eta)
        except Exception:
            logger.warning("could not enqueue the delivery to destination %s", destination_id, exc_info=True)
