"""What the tasks refuse, as errors of the one tree; each has its own `code` for pages to decide by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flarebot.core.errors import Conflict, InvalidInput, LimitReached, NotFound


class FieldInvalid(InvalidInput):
    """A value refused in words; the field it is about goes in `fields`, never into the message."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, extra={"fields": {field: [message[:500]]}})


class ScheduleInvalid(FieldInvalid):
    """A schedule is not one the tasks accept; the message says what is."""

    code = "invalid_schedule"

    def __init__(self, message: str, *, field: str = "schedule") -> None:
        super().__init__(message, field=field)


class TaskInvalid(FieldInvalid):
    """A name, instructions or flag that a task may not have."""

    code = "invalid_task"


class TasksFull(LimitReached):
    """The installation holds as many active tasks as it may."""

    code = "task_limit"


class TaskNotFound(NotFound):
    """No active task has this id (it never existed, or it was deleted)."""

    code = "not_found"
    default_message = "There is no such task; it may have been deleted."


class TaskConflict(Conflict):
    """The task changed since the version the request was based on; `current` is what it is now."""

    code = "version_conflict"

    def __init__(self, message: str, *, current: Mapping[str, Any]) -> None:
        super().__init__(message, extra={"current": current})
        self.current = current


class TaskIdConflict(Conflict):
    """A creation reuses the id of a different task, or of a deleted one."""

    code = "id_conflict"
