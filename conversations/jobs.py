"""Celery jobs of the conversations app: thin wrappers that load ids and call services."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.db import DatabaseError, close_old_connections, connections

from conversations import services, titling, turns
from conversations.browser_tasks.lifecycle import browser_tasks_reconcile as _browser_tasks_reconcile
from conversations.browser_tasks.runner import browser_task_run as _browser_task_run
from conversations.engine.runtime import engine_runtime, engine_runtime_started
from conversations.providers.catalog import provider_sdk_load, providers_all_loaded
from conversations.selectors import providers_configured
from flarebot.core.heap import heap_settle
from flarebot.core.heartbeat import BEAT, heartbeat_record

# How long a stopping worker lets the turns it started from the doorbell finish.
SHUTDOWN_GRACE_SECONDS = 120
# How often a worker looks for a provider configured since (a key saved) to load its SDK,
# until it has loaded every one: one small query, so that the SDK is loaded before the
# first message after a key is saved.
PROVIDERS_CHECK_SECONDS = 2


@shared_task(name="conversations.jobs.conversation_teardown")
def conversation_teardown(conversation_id: str) -> None:
    """Tear down one deleted conversation."""
    services.conversation_teardown(conversation_id=uuid.UUID(conversation_id))


@shared_task(name="conversations.jobs.conversation_finish_deletions")
def conversation_finish_deletions() -> None:
    """Finish deletions that a crash or restart interrupted."""
    services.conversations_finish_deletions()


@shared_task(name="conversations.jobs.conversation_title")
def conversation_title(conversation_id: str) -> None:
    """Have the model name a conversation after its first answer (one small request, claimed once)."""
    titling.conversation_title_ask(conversation_id=uuid.UUID(conversation_id))


@shared_task(name="conversations.jobs.turn_run")
def turn_run(turn_id: str) -> None:
    """Run one turn on this process's engine loop; a duplicate delivery returns at once."""
    runtime = engine_runtime()
    runtime.run(runtime.turn(uuid.UUID(turn_id)))


@shared_task(name="conversations.jobs.turns_reconcile")
def turns_reconcile() -> None:
    """Requeue turns whose worker died or whose enqueue was lost; beat's tick is its heartbeat."""
    heartbeat_record(name=BEAT, kind="beat")
    turns.turns_reconcile()


@shared_task(name="conversations.jobs.browser_task_run")
def browser_task_run(task_id: str) -> None:
    """Run or resume one browser task on this process's engine loop (queue `tools`); returns when it pauses."""
    runtime = engine_runtime()
    runtime.run(_browser_task_run(uuid.UUID(task_id), cancels=runtime.cancels))


@shared_task(name="conversations.jobs.browser_tasks_reconcile")
def browser_tasks_reconcile() -> None:
    """Requeue browser tasks whose worker died, and project outcomes not projected yet."""
    _browser_tasks_reconcile()


@worker_ready.connect
def _recover_on_start(**kwargs: Any) -> None:
    engine_runtime()  # answers the turn doorbell from now on
    threading.Thread(target=_providers_keep_loaded, name="providers-load", daemon=True).start()
    conversation_finish_deletions.delay()
    turns_reconcile.delay()
    browser_tasks_reconcile.delay()


def _providers_keep_loaded() -> None:
    """Load the configured providers' SDKs now, then each one configured later."""
    while not providers_all_loaded():
        close_old_connections()  # this thread's connection may have broken since
        with contextlib.suppress(DatabaseError):
            _providers_load()
        time.sleep(PROVIDERS_CHECK_SECONDS)
    connections.close_all()  # this thread's, which ends here


def _providers_load() -> None:
    """Import the SDKs of the providers configured now that this worker has not loaded.

    A worker holds only the SDKs a turn could use, loaded on this thread, so that neither
    its start nor a turn waits for them. A turn that comes
    first imports its provider's on a thread of its own (`catalog.adapter_loaded`).
    """
    loaded = [provider_sdk_load(provider) for provider in sorted(set(providers_configured()))]
    if any(loaded):
        heap_settle()  # what the worker loaded lives as long as it: keep it out of GC pauses


@worker_shutdown.connect
def _finish_running_turns(**kwargs: Any) -> None:
    runtime = engine_runtime_started()
    if runtime is not None:
        runtime.shutdown(SHUTDOWN_GRACE_SECONDS)
