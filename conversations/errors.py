"""What the conversations app refuses, and what stops an attempt of its work.

`ConversationNotFound` is the one answer, everywhere, for a conversation that does not
exist or is being deleted (a task naming one gives it too). `LeaseLost` never reaches a
client: it unwinds an attempt (a turn's or a browser task's) whose lease another attempt,
or an end, took over.
"""

from __future__ import annotations

from flarebot.core.errors import NotFound


class ConversationNotFound(NotFound):
    """The conversation does not exist, or it is being deleted."""

    code = "conversation_not_found"
    default_message = "This conversation does not exist."


class LeaseLost(Exception):
    """The attempt no longer holds its lease: another attempt, or an end, took over; stop without writing."""
