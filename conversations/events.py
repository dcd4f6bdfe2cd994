"""Typed payloads that workers and the web process send to conversation sockets."""

from __future__ import annotations

import uuid
from typing import Literal, TypedDict


class ConversationDeleted(TypedDict):
    """Sent to a conversation's group when it is deleted: sockets close with 4004."""

    type: Literal["conversation.deleted"]


def conversation_group(conversation_id: uuid.UUID | str) -> str:
    """Return the Channels group of every socket open on this conversation."""
    return f"conversation.{conversation_id}"
