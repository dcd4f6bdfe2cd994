"""Delivering notifications: claiming what is due to a destination, sending it, retrying.

- A delivery is claimed (pending -> sending, with a fresh claim) by one conditional update
  before anything is sent; a claim that a stopped worker left behind is marked failed by
  the sweep, never sent again (it may have arrived).
- At most one message per destination per kind per `COALESCE` window: what comes within
  it waits for the window's end and goes as one message saying how many.
- Quiet hours hold every kind but "needs an answer" (`services.quiet_until`); when they
  end, everything they held goes to each destination as one summary.
- Every claim checks again what is pending: a question answered (or denied, or its task
  ended) and a proposal taken are dropped, never sent, so a count is what still waits.
  The check is made under the destination's lock just before the claim; an answer given
  during the send itself (its bound is `transport.SEND_BOUND`) can still be told.
- Messages about one subject (a browser task, a scheduled task) keep their order: one
  that is due waits while an earlier one about the same subject waits for its minute or
  a retry, and the messages of one pass go in the order their first notification came.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import transaction
from django.db.models import F, Max, Min, QuerySet
from django.utils import timezone

from flarebot.core.crypto import Secret
from notifications.messages import ANSWERABLE, PLURALS, keys_resolved, one_line
from notifications.models import Delivery, DeliveryStatus, Destination, Kind, Notification
from notifications.services import MAX_DESTINATIONS, UNREADABLE, destination_url, quiet_until, settings_get
from notifications.transport import Message, TransportError, message_send

MAX_ATTEMPTS = 5
BACKOFF = (timedelta(seconds=15), timedelta(seconds=60), timedelta(minutes=5), timedelta(minutes=15))
COALESCE = timedelta(minutes=1)
# A claim older than this belongs to a worker that stopped mid-send (the send's bound is far shorter).
STALE_CLAIM = timedelta(minutes=2)
KEEP = timedelta(days=30)  # how long told notifications are kept
STALE_MESSAGE = "A worker stopped while sending this; it may have arrived, so it is not sent again."


def _link(path: str) -> str:
    return f"{django_settings.FLAREBOT_ORIGIN}{path}"


def _message(deliveries: Sequence[Delivery], *, summary_of_quiet: bool) -> Message:
    """One message for these deliveries: one notification as it is, several by how many there are."""
    latest = max(deliveries, key=lambda d: d.notification.created_at).notification
    if len(deliveries) == 1 and not summary_of_quiet:
        return Message(title=latest.title, body=f"{latest.summary}\n{_link(latest.path)}")
    counts: dict[str, int] = {}
    for delivery in deliveries:
        counts[delivery.kind] = counts.get(delivery.kind, 0) + 1
    if summary_of_quiet:
        parts = [PLURALS[Kind(kind)].format(n=n) if n > 1 else Kind(kind).label.lower() for kind, n in counts.items()]
        held = len(deliveries)
        return Message(
            title=f"While quiet hours held them: {held} notification{'s' if held != 1 else ''}",
            body=one_line("; ".join(parts) + ".") + f"\n{_link('/')}",
        )
    kind = Kind(deliveries[0].kind)
    return Message(
        title=PLURALS[kind].format(n=len(deliveries)),
        body=f"Latest: {latest.title}. {latest.summary}\n{_link(latest.path)}",
    )


def _claim(pending: QuerySet[Delivery], now: datetime) -> list[Delivery]:
    """Take these pending deliveries for one send; return those taken (none a second time)."""
    claim = uuid.uuid4()
    pending.filter(status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.SENDING, claim=claim, claimed_at=now, attempts=F("attempts") + 1, updated_at=now
    )
    return list(Delivery.objects.select_related("notification").filter(claim=claim, status=DeliveryStatus.SENDING))


def _drop_resolved(pending: QuerySet[Delivery], now: datetime) -> None:
    """Drop the pending questions and proposals that no longer wait for the owner."""
    rows = list(pending.filter(kind__in=ANSWERABLE).values_list("id", "notification__key"))
    resolved = keys_resolved(keys={key for _, key in rows})
    dropped = [id_ for id_, key in rows if key in resolved]
    if dropped:
        pending.filter(id__in=dropped).update(status=DeliveryStatus.DROPPED, updated_at=now)


def _keep_order(pending: QuerySet[Delivery], now: datetime) -> None:
    """Postpone what is due while an earlier delivery about its subject waits (its minute or a retry)."""
    rows = (
        pending.filter(held=False)
        .exclude(notification__subject="")
        .order_by("notification__created_at")
        .values_list("id", "notification__subject", "due_at")
    )
    waiting: dict[str, datetime] = {}  # a subject's latest due time of those that wait
    postponed: dict[datetime, list[uuid.UUID]] = {}
    for id_, subject, due_at in rows:
        until = waiting.get(subject)
        if due_at <= now and until is not None:
            postponed.setdefault(until, []).append(id_)
            due_at = until
        if due_at > now:
            waiting[subject] = max(due_at, until or due_at)
    for until, ids in postponed.items():
        pending.filter(id__in=ids).update(due_at=until, updated_at=now)


def _take(destination: Destination, now: datetime) -> list[tuple[list[Delivery], bool]]:
    """Claim what is due to a destination, as the messages to send: (deliveries, quiet hours' summary).

    The destination's row is locked while what is pending is checked again, the coalescing
    minute and the order are kept and the claims are made, so two workers at once never
    both send a kind's message within the minute. A message counts from its claim, not its
    arrival.
    """
    messages: list[tuple[list[Delivery], bool]] = []
    with transaction.atomic():
        # FOR NO KEY UPDATE: the events' transactions insert deliveries that refer to this row
        # (a key-share lock) and never wait for it.
        if Destination.objects.select_for_update(no_key=True).filter(id=destination.id).first() is None:
            return []
        pending = Delivery.objects.filter(destination=destination, status=DeliveryStatus.PENDING)
        _drop_resolved(pending, now)
        due = pending.filter(due_at__lte=now)
        quiet_end = quiet_until(settings_get(), now)
        if quiet_end is not None:
            due.exclude(kind=Kind.NEEDS_ANSWER).update(held=True, due_at=quiet_end, updated_at=now)
        held = _claim(due.filter(held=True), now)
        if held:
            messages.append((held, True))
        kinds = sorted(set(due.filter(held=False).values_list("kind", flat=True)))
        for kind in kinds:
            last = Delivery.objects.filter(
                destination=destination,
                kind=kind,
                status__in=[DeliveryStatus.SENDING, DeliveryStatus.SENT],
                claimed_at__isnull=False,
            ).aggregate(at=Max("claimed_at"))["at"]
            if last is not None and now < last + COALESCE:
                due.filter(held=False, kind=kind).update(due_at=last + COALESCE, updated_at=now)
        _keep_order(pending, now)
        coalesced = [_claim(due.filter(held=False, kind=kind), now) for kind in kinds]
        coalesced = sorted(filter(None, coalesced), key=lambda taken: min(d.notification.created_at for d in taken))
        messages += [(taken, False) for taken in coalesced]
    return messages


def _finish(taken: Sequence[Delivery], failure: TransportError | None, now: datetime) -> datetime | None:
    """Record a send's outcome; return when a retry is due, if one is."""
    if failure is None:
        Delivery.objects.filter(id__in=[d.id for d in taken], status=DeliveryStatus.SENDING).update(
            status=DeliveryStatus.SENT, sent_at=now, error="", updated_at=now
        )
        return None
    retry_at: datetime | None = None
    for delivery in taken:
        last = failure.permanent or delivery.attempts >= MAX_ATTEMPTS
        times = f"{delivery.attempts} time{'s' if delivery.attempts != 1 else ''}"
        tried = f"{failure.message.rstrip('.')} (tried {times})."
        if last:
            values: dict[str, Any] = {"status": DeliveryStatus.FAILED, "error": tried[:300]}
        else:
            due = now + BACKOFF[min(delivery.attempts, len(BACKOFF)) - 1]
            values = {"status": DeliveryStatus.PENDING, "due_at": due, "error": tried[:300]}
            retry_at = due if retry_at is None else min(retry_at, due)
        Delivery.objects.filter(id=delivery.id, status=DeliveryStatus.SENDING, claim=delivery.claim).update(
            **values, updated_at=now
        )
    return retry_at


def _send(url: Secret | None, taken: Sequence[Delivery], now: datetime, *, quiet: bool) -> datetime | None:
    failure: TransportError | None
    if url is None:
        failure = TransportError(UNREADABLE, permanent=True)
    else:
        try:
            message_send(url=url, message=_message(taken, summary_of_quiet=quiet))
            failure = None
        except TransportError as error:
            failure = error
    return _finish(taken, failure, now)


def destination_deliver(*, destination_id: uuid.UUID, now: datetime | None = None) -> datetime | None:
    """Send what is due to one destination; return when a failed send is to be tried again, if one is.

    Held deliveries whose quiet hours ended go as one summary; the others go as one message
    per kind, unless a message of that kind went out less than `COALESCE` ago: then they
    wait for the window's end (the sweep sends them).
    """
    now = now or timezone.now()
    destination = Destination.objects.filter(id=destination_id).first()
    if destination is None:
        return None
    messages = _take(destination, now)
    if not messages:
        return None
    url = destination_url(destination)
    retries = [_send(url, taken, now, quiet=quiet) for taken, quiet in messages]
    later = [at for at in retries if at is not None]
    return min(later) if later else None


def notifications_sweep(*, now: datetime | None = None) -> list[uuid.UUID]:
    """Fail claims a stopped worker left, drop old notifications; return destinations with deliveries due."""
    now = now or timezone.now()
    Delivery.objects.filter(status=DeliveryStatus.SENDING, claimed_at__lt=now - STALE_CLAIM).update(
        status=DeliveryStatus.FAILED, error=STALE_MESSAGE, updated_at=now
    )
    Notification.objects.filter(created_at__lt=now - KEEP).exclude(
        deliveries__status__in=[DeliveryStatus.PENDING, DeliveryStatus.SENDING]
    ).delete()
    return list(
        Delivery.objects.filter(status=DeliveryStatus.PENDING, due_at__lte=now)
        .values("destination_id")
        .annotate(first=Min("due_at"))
        .order_by("first")
        .values_list("destination_id", flat=True)[:MAX_DESTINATIONS]
    )
