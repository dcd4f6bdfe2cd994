"""Receivers of the conversations app's signals; each calls one service of this app."""

from __future__ import annotations

import uuid

from tasks.services import tasks_tombstone_for_conversation


def on_conversation_torn_down(*, conversation_id: uuid.UUID, **kwargs: object) -> None:
    """A deleted conversation's tasks become tombstones; nothing recreates them."""
    tasks_tombstone_for_conversation(conversation_id=conversation_id)
