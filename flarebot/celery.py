"""The Celery application: broker and queues from Django settings, jobs from each app's jobs.py."""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")
# Celery's Django fixup runs Django's system checks when a worker or beat starts. They
# import every URL, view and API (DRF, drf-spectacular, the pages) into a process that
# serves none of them. `make run` and Compose run them in their migrate step.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")


def celery_app(*, jobs: bool) -> Celery:
    """Flarebot's Celery app; with `jobs`, each app's jobs.py is imported when a worker starts.

    Beat runs without them (`flarebot.celery_beat`): it sends jobs by name, routed by
    CELERY_TASK_ROUTES, and never needs the code a job runs (the model SDKs, Playwright).
    """
    made = Celery("flarebot")
    made.config_from_object("django.conf:settings", namespace="CELERY")
    made.conf.task_queues = (Queue("turns"), Queue("tools"), Queue("default"))
    if jobs:
        made.autodiscover_tasks(related_name="jobs")
    return made


app = celery_app(jobs=True)


def _worker_name(sender: Any) -> str:
    return getattr(sender, "hostname", None) or f"worker@{socket.gethostname()}-{os.getpid()}"


# This process's heartbeat, from its worker's start to its stop.
_heartbeats: list[Any] = []


@worker_ready.connect
def _heartbeat(sender: Any = None, **kwargs: Any) -> None:
    """Report this worker alive, with what it finds on its machine, for as long as it runs.

    The first record is made here, before Celery logs "ready.": from then on the System
    section shows this worker, never what a stopped one of the same name had found.
    """
    from flarebot.core.heartbeat import WorkerHeartbeat

    heartbeat = WorkerHeartbeat(_worker_name(sender))
    _heartbeats.append(heartbeat)
    heartbeat.start()


@worker_shutdown.connect
def _gone(sender: Any = None, **kwargs: Any) -> None:
    """Say at once that this worker stopped: the System section counts only the live ones."""
    from django.db import DatabaseError

    from flarebot.core.heartbeat import heartbeat_forget

    # If the database went first, the row goes stale on its own.
    with contextlib.suppress(DatabaseError):
        if _heartbeats:
            _heartbeats.pop().stop()
        else:
            heartbeat_forget(name=_worker_name(sender))
