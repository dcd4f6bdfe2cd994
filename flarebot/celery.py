"""The Celery application: broker and queues from Django settings, jobs from each app's jobs.py."""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")

app = Celery("flarebot")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("turns"), Queue("tools"), Queue("default"))
app.autodiscover_tasks(related_name="jobs")
