"""Beat's fixed jobs as the database scheduler sends them."""

from __future__ import annotations

import logging

import pytest
from django.conf import settings
from django_celery_beat.schedulers import ModelEntry

from flarebot.celery import app

pytestmark = [pytest.mark.django_db, pytest.mark.database]

# django-celery-beat reads an expiry only as `expire_seconds`: an `expires` option is
# silently dropped, and a run nobody took in time would then wait in the queue for ever.
EXPIRY_SECONDS = {
    "conversations-reconcile-turns": 20,
    "conversations-reconcile-browser-tasks": 20,
    "tools-browser-leases-sweep": 60,
    "tools-shell-leases-sweep": 30,
    "tasks-reconcile": 30,
}


@pytest.mark.parametrize(("name", "seconds"), sorted(EXPIRY_SECONDS.items()))
def test_beat_sends_each_fixed_job_with_its_expiry(name: str, seconds: int) -> None:
    entry = ModelEntry.from_entry(name, app=app, **settings.CELERY_BEAT_SCHEDULE[name])

    assert entry.options["expires"] == seconds


# Beat commits and closes connections as it reads: a transaction of the test's own would break.
@pytest.mark.django_db(transaction=True)
def test_a_fixed_job_deleted_while_beat_runs_is_back_at_the_next_reload_with_a_warning(caplog) -> None:
    from django_celery_beat.models import PeriodicTask

    from tasks.beat import TaskDatabaseScheduler

    scheduler = TaskDatabaseScheduler(app=app, lazy=True)
    scheduler.setup_schedule()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # a fresh database is no warning
    PeriodicTask.objects.filter(name="conversations-reconcile-turns").delete()

    reloaded = scheduler.all_as_schedule()

    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "conversations-reconcile-turns were not in the database" in warning.getMessage()
    assert "conversations-reconcile-turns" in reloaded
    assert reloaded["conversations-reconcile-turns"].options["expires"] == 20
    assert PeriodicTask.objects.filter(name="conversations-reconcile-turns", enabled=True).exists()


# Beat commits and closes connections as it reads: a transaction of the test's own would break.
@pytest.mark.django_db(transaction=True)
def test_a_fixed_job_the_operator_disabled_stays_disabled() -> None:
    from django_celery_beat.models import PeriodicTask

    from tasks.beat import TaskDatabaseScheduler

    scheduler = TaskDatabaseScheduler(app=app, lazy=True)
    scheduler.setup_schedule()
    PeriodicTask.objects.filter(name="tools-browser-leases-sweep").update(enabled=False)

    reloaded = scheduler.all_as_schedule()

    assert "tools-browser-leases-sweep" not in reloaded
    assert "conversations-reconcile-turns" in reloaded


# Beat commits and closes connections as it reads: a transaction of the test's own would break.
@pytest.mark.django_db(transaction=True)
def test_a_change_after_the_marker_was_gone_and_came_back_is_reloaded() -> None:
    from django_celery_beat.models import PeriodicTasks

    from tasks.beat import TaskDatabaseScheduler

    scheduler = TaskDatabaseScheduler(app=app, lazy=True)
    scheduler.setup_schedule()
    PeriodicTasks.update_changed()
    assert scheduler.schedule_changed() is True  # django-celery-beat's own case
    assert scheduler.schedule_changed() is False
    PeriodicTasks.objects.all().delete()  # the tables emptied while beat runs
    assert scheduler.schedule_changed() is False

    PeriodicTasks.update_changed()  # a task armed: its change marker is written again

    assert scheduler.schedule_changed() is True
    assert scheduler.schedule_changed() is False


# Beat commits and closes connections as it reads: a transaction of the test's own would break.
@pytest.mark.django_db(transaction=True)
def test_a_database_error_while_beat_reads_its_schedule_keeps_beat_running_and_it_reads_again(
    caplog, monkeypatch
) -> None:
    from django.db import IntegrityError
    from django_celery_beat.models import PeriodicTask

    from tasks.beat import TaskDatabaseScheduler, TaskEntry

    scheduler = TaskDatabaseScheduler(app=app, lazy=True)
    scheduler.setup_schedule()
    held = scheduler.schedule
    PeriodicTask.objects.filter(name="conversations-reconcile-turns").delete()

    def refused(cls: type, *args: object, **kwargs: object) -> None:
        # As when the tables were emptied between a job's schedule row and its own row.
        raise IntegrityError("FOREIGN KEY constraint failed")

    monkeypatch.setattr(TaskEntry, "from_entry", classmethod(refused))
    kept = scheduler.all_as_schedule()  # django-celery-beat alone would raise, and beat would end

    assert kept is held
    assert scheduler.schedule_changed() is True  # the next tick reads it again
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING and "could not read" in r.getMessage()]
    assert "FOREIGN KEY constraint failed" not in warning.getMessage()  # the detail is in the traceback
    monkeypatch.undo()

    reloaded = scheduler.all_as_schedule()

    assert "conversations-reconcile-turns" in reloaded
    assert PeriodicTask.objects.filter(name="conversations-reconcile-turns", enabled=True).exists()


# Beat commits and closes connections as it reads: a transaction of the test's own would break.
@pytest.mark.django_db(transaction=True)
def test_a_row_whose_schedule_went_while_beat_read_is_left_out_and_beat_reads_again(monkeypatch) -> None:
    from tasks.beat import TaskDatabaseScheduler

    scheduler = TaskDatabaseScheduler(app=app, lazy=True)
    scheduler.setup_schedule()
    scheduler.schedule_changed()
    read = scheduler.enabled_models

    def schedule_deleted_in_between() -> list:
        # The rows, then their schedules: one was deleted between the two statements.
        models = read()
        gone = next(m for m in models if m.name == "tools-shell-leases-sweep")
        gone.interval = None
        return models

    monkeypatch.setattr(scheduler, "enabled_models", schedule_deleted_in_between)
    partial = scheduler.all_as_schedule()  # django-celery-beat alone raises, and beat would end

    assert "tools-shell-leases-sweep" not in partial
    assert "conversations-reconcile-turns" in partial
    assert scheduler.schedule_changed() is True  # the next tick reads it again
    monkeypatch.undo()

    assert "tools-shell-leases-sweep" in scheduler.all_as_schedule()
    assert scheduler.schedule_changed() is False
