"""Celery jobs of the conversations app: thin wrappers that load ids and call services."""

from __future__ import annotations

import uuid
from typing import Any

from celery import shared_task
from celery.signals import worker_ready

from conversations import services


@shared_task(name="conversations.jobs.conversation_teardown")
def conversation_teardown(conversation_id: str) -> None:
    """Tear down one deleted conversation."""
    services.conversation_teardown(conversation_id=uuid.UUID(conversation_id))


@shared_task(name="conversations.jobs.conversation_finish_deletions")
def conversation_finish_deletions() -> None:
    """Finish deletions that a crash or restart interrupted."""
    services.conversations_finish_deletions()


@worker_ready.connect
def _finish_deletions_on_start(**kwargs: Any) -> None:
    conversation_finish_deletions.delay()
