"""What notifications refuse, as errors of the one tree; each has its own `code` for pages to decide by."""

from __future__ import annotations

from flarebot.core.errors import InvalidInput, LimitReached, NotFound


class DestinationInvalid(InvalidInput):
    """A destination's label or URL is outside what a destination may be."""

    code = "invalid_destination"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, extra={"fields": {field: [message]}})


class DestinationUnreadable(InvalidInput):
    """Apprise cannot parse the URL: no service it knows, or a service's URL in the wrong form."""

    code = "invalid_url"


class DestinationsFull(LimitReached):
    """As many destinations as there may be exist already."""

    code = "destinations_full"


class DestinationNotFound(NotFound):
    """No destination has this id (it never existed, or it was deleted)."""

    code = "not_found"
    default_message = "There is no such destination; it may have been deleted."


class SettingsInvalid(InvalidInput):
    """The kinds or quiet hours are outside what the settings may be."""

    code = "invalid_settings"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, extra={"fields": {field: [message]}})
