"""What the conversations app refuses, and what stops an attempt of its work.

`ConversationNotFound` is the one answer, everywhere, for a conversation that does not
exist or is being deleted (a task naming one gives it too). `LeaseLost` never reaches a
client: it unwinds an attempt (a turn's or a browser task's) whose lease another attempt,
or an end, took over.
"""

from __future__ import annotations

from flarebot.core.errors import Conflict, FlarebotError, NotFound


class ConversationNotFound(NotFound):
    """The conversation does not exist, or it is being deleted."""

    code = "conversation_not_found"
    default_message = "This conversation does not exist."


class LeaseLost(Exception):
    """The attempt no longer holds its lease: another attempt, or an end, took over; stop without writing."""


class NothingToTitle(Conflict):
    """The conversation has no message to title it by yet."""

    code = "nothing_to_title"
    default_message = "This conversation has no message yet: its first message names it."


class TitleUnavailable(FlarebotError):
    """The model could not be asked for a title, or gave none; `message` says why, safely."""

    status = 502
    code = "title_unavailable"
    default_message = "The model gave no title. Try again."
