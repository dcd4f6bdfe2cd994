"""The Celery application: broker and queues from Django settings, jobs from each app's jobs.py."""

from __future__ import annotations

import os
import socket
from typing import Any

from celery import Celery
from celery.signals import worker_ready
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")

app = Celery("flarebot")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("turns"), Queue("tools"), Queue("default"))
app.autodiscover_tasks(related_name="jobs")


@worker_ready.connect
def _heartbeat(sender: Any = None, **kwargs: Any) -> None:
    """Report this worker alive, with what it finds on its machine, for as long as it runs."""
    from flarebot.core.heartbeat import worker_heartbeat_start

    worker_heartbeat_start(getattr(sender, "hostname", None) or f"worker@{socket.gethostname()}-{os.getpid()}")
