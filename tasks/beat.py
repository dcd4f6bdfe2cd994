"""Beat's scheduler: django-celery-beat's DatabaseScheduler, writing none of its bookkeeping onto task rows.

After firing a row, the DatabaseScheduler saves the row's run count and last run back
(the whole row, as it had read it), and on its next look it disables a `one_off` row that
has run. A task's row is armed again and again at its next occurrence (`tasks.arming`):
that write-back would undo a re-arm made meanwhile, and the disabling would stop the
task. So the rows of tasks keep no bookkeeping; the run history is the task's own
(`TaskRun`). Every other row is handled exactly as django-celery-beat does.
"""

from __future__ import annotations

from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry

from tasks.arming import PERIODIC_PREFIX


class TaskEntry(ModelEntry):
    def save(self) -> None:
        if self.name.startswith(PERIODIC_PREFIX):
            return
        super().save()


class TaskDatabaseScheduler(DatabaseScheduler):
    """The DatabaseScheduler, with `TaskEntry` for its rows."""

    Entry = TaskEntry
