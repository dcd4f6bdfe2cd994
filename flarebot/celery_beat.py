"""The Celery app beat runs (`celery -A flarebot.celery_beat beat`): Flarebot's, without the jobs.

Beat reads the schedules from the database (django-celery-beat, `tasks.beat`) and sends
each due job by name; the queue comes from CELERY_TASK_ROUTES. Two things a worker does
at its start would load the whole of Flarebot (the model SDKs, Playwright, every view)
into a process that never runs a job or serves a page, so beat skips them:

- importing every app's jobs.py (`celery_app(jobs=False)`);
- Django's system checks, which import every URL and view (`flarebot.celery` skips
  them in workers and beat alike: `make run` runs them in its `migrate` step).
"""

from __future__ import annotations

from flarebot.celery import celery_app

app = celery_app(jobs=False)
