"""Celery jobs of notifications: thin, idempotent, primitive ids only (never a URL)."""

from __future__ import annotations

import uuid

from celery import shared_task

from notifications import delivery


@shared_task(name="notifications.jobs.destination_deliver")
def destination_deliver(destination_id: str) -> None:
    """Send what is due to one destination; come back when a failed send is to be retried."""
    retry_at = delivery.destination_deliver(destination_id=uuid.UUID(destination_id))
    if retry_at is not None:
        destination_deliver.apply_async(args=(destination_id,), eta=retry_at)


@shared_task(name="notifications.jobs.notifications_sweep")
def notifications_sweep() -> None:
    """Beat's sweep: stale claims, coalesced and held deliveries whose time came, retries a lost job left."""
    for destination_id in delivery.notifications_sweep():
        delivery.destination_deliver(destination_id=destination_id)
