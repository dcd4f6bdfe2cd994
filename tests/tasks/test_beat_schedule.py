"""Beat's fixed jobs as the database scheduler sends them."""

from __future__ import annotations

import pytest
from django.conf import settings
from django_celery_beat.schedulers import ModelEntry

from flarebot.celery import app

pytestmark = pytest.mark.django_db

# django-celery-beat reads an expiry only as `expire_seconds`: an `expires` option is
# silently dropped, and a run nobody took in time would then wait in the queue for ever.
EXPIRY_SECONDS = {
    "conversations-reconcile-turns": 20,
    "conversations-reconcile-browser-tasks": 20,
    "tools-browser-leases-sweep": 60,
    "tasks-reconcile": 30,
}


@pytest.mark.parametrize(("name", "seconds"), sorted(EXPIRY_SECONDS.items()))
def test_beat_sends_each_fixed_job_with_its_expiry(name: str, seconds: int) -> None:
    entry = ModelEntry.from_entry(name, app=app, **settings.CELERY_BEAT_SCHEDULE[name])

    assert entry.options["expires"] == seconds
