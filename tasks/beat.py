"""Beat's scheduler: django-celery-beat's DatabaseScheduler, writing none of its bookkeeping onto task rows.

After firing a row, the DatabaseScheduler saves the row's run count and last run back
(the whole row, as it had read it), and on its next look it disables a `one_off` row that
has run. A task's row is armed again and again at its next occurrence (`tasks.arming`):
that write-back would undo a re-arm made meanwhile, and the disabling would stop the
task. So the rows of tasks keep no bookkeeping; the run history is the task's own
(`TaskRun`). Every other row is handled exactly as django-celery-beat does.

A change marker that reappears after beat found none (the tables emptied while it ran)
counts as a change, which django-celery-beat alone would miss.

Beat's fixed jobs (`CELERY_BEAT_SCHEDULE`: reconciliation, sweeps) are rows too, written
at beat's start. Should one vanish while beat runs (deleted in the admin, a restored
backup), the next reload of the schedule writes it again: without them a dead worker's
turn would never be requeued. That is a warning; on beat's first load (a fresh database)
writing them is the normal start, and is not one.

A database error while the schedule is read or a fixed job written (the server restarting,
the tables emptied between a job's schedule row and its own) keeps the schedule beat has,
and a row whose schedule was deleted while it was read is left out; either way beat reads
again at the next tick, where django-celery-beat would let it end beat.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db import DatabaseError
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry

from tasks.arming import PERIODIC_PREFIX

logger = logging.getLogger(__name__)


class TaskEntry(ModelEntry):
    def save(self) -> None:
        if self.name.startswith(PERIODIC_PREFIX):
            return
        super().save()


class TaskDatabaseScheduler(DatabaseScheduler):
    """The DatabaseScheduler, with `TaskEntry` for its rows and its fixed jobs always present."""

    Entry = TaskEntry
    _loaded = False  # whether a schedule was loaded before in this process
    _read_again = False  # the last read failed or skipped a row: read again at the next tick

    def schedule_changed(self) -> bool:
        """Whether to reload; also when the change marker comes back after a look that found none.

        django-celery-beat compares the marker (`PeriodicTasks`' one row) with the one it saw
        last, and a look that finds no row forgets the last: the next marker then reads as
        no change, and a task armed then would not be loaded for up to 5 minutes. The row
        goes when the tables are emptied (a restored or truncated database) while beat runs.
        """
        before = self._last_timestamp
        changed: bool = super().schedule_changed()
        return changed or self._read_again or (before is None and self._last_timestamp is not None)

    def all_as_schedule(self) -> dict[str, Any]:
        failing = self._read_again
        self._read_again = False
        try:
            return self._schedule_read()
        except (DatabaseError, ObjectDoesNotExist):  # a row gone while it was written
            if not failing:
                logger.warning(
                    "beat could not read its schedule; it keeps the one it had and tries again", exc_info=True
                )
            self._read_again = True
            return self._schedule if self._schedule is not None else {}

    def _entries(self) -> dict[str, Any]:
        """django-celery-beat's read of the rows, less a row whose schedule went meanwhile.

        It reads the rows, then their schedules (a second statement): a schedule deleted in
        between (with its rows, in the admin or by emptying the tables) leaves a row with
        none, where django-celery-beat would end beat. The next tick reads them again.
        """
        entries: dict[str, Any] = {}
        for model in self.enabled_models():
            if model.scheduler is None:
                self._read_again = True
                continue
            with contextlib.suppress(ValueError):  # as django-celery-beat: a row it cannot use
                entries[model.name] = self.Entry(model, app=self.app)
        return entries

    def _schedule_read(self) -> dict[str, Any]:
        schedule = self._entries()
        fixed: dict[str, dict[str, Any]] = self.app.conf.beat_schedule or {}
        present = set(PeriodicTask.objects.filter(name__in=list(fixed)).values_list("name", flat=True))
        missing = sorted(set(fixed) - present)
        if missing and self._loaded:
            logger.warning("beat's fixed jobs %s were not in the database; written again", ", ".join(missing))
        elif missing:
            logger.info("writing beat's fixed jobs %s", ", ".join(missing))
        self._loaded = True
        for name in missing:
            entry = self.Entry.from_entry(name, app=self.app, **fixed[name])
            if entry.model.enabled:
                schedule[name] = entry
        return schedule
