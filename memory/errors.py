"""What the memory refuses, as errors of the one tree; each has its own `code` for pages to decide by."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flarebot.core.errors import Conflict, FlarebotError, InvalidInput, LimitReached, NotFound


class FactInvalid(InvalidInput):
    """The text of a fact is blank or holds characters a fact may not hold."""

    code = "invalid_fact"


class FactTooLong(InvalidInput):
    """The text of a fact is longer than a fact may be."""

    code = "fact_too_long"


class MemoryFull(LimitReached):
    """The memory holds as many active facts as it may."""

    code = "memory_full"


class DeleteItemsInvalid(InvalidInput):
    """A bulk delete names no fact, more facts than one request may, or a fact twice."""

    code = "invalid"


class FactNotFound(NotFound):
    """No active fact has this id (it never existed, or it was deleted)."""

    code = "not_found"
    default_message = "There is no such fact; it may have been deleted."


class FactConflict(Conflict):
    """The fact changed since the version the request was based on; `current` is what it is now."""

    code = "version_conflict"

    def __init__(self, message: str, *, current: Mapping[str, Any]) -> None:
        super().__init__(message, extra={"current": current})
        self.current = current


class QueryTooLong(InvalidInput):
    """A search query is longer than a query may be."""

    code = "query_too_long"


class WriteAbandoned(FlarebotError):
    """A tool's write found its turn stopped or its conversation being deleted, and wrote nothing."""

    status = 409
    code = "abandoned"
    default_message = "Nothing was written: the turn was stopped or its conversation is being deleted."
