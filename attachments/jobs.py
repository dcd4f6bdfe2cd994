"""Celery jobs of attachments: thin wrappers that call services."""

from __future__ import annotations

from celery import shared_task

from attachments import services


@shared_task(name="attachments.jobs.attachments_sweep")
def attachments_sweep() -> None:
    """Remove interrupted uploads and blobs no attachment names."""
    services.attachments_sweep()
