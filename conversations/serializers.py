"""The contract's JSON shapes of conversations, messages and turns (PROTOCOL.md `C`, `M`).

Views, sockets and the turn services all build them here, so an object has one shape
wherever it is sent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from conversations import selectors
from conversations.models import Conversation, Message, MessageRole, Turn, TurnStatus
from flarebot.core.times import iso


def conversation_json(conversation: Conversation) -> dict[str, Any]:
    """Return the contract's `C` for one conversation.

    `unread` (an addition) is the count `selectors.conversations_unread` annotated; a row
    read without it is counted here.
    """
    unread = getattr(conversation, "unread", None)
    if unread is None:
        unread = selectors.conversation_unread(conversation_id=conversation.id) or 0
    return {
        "id": str(conversation.id),
        "name": conversation.name,
        "created_at": iso(conversation.created_at),
        "updated_at": iso(conversation.updated_at),
        "unread": int(unread),
    }


def message_json(message: Message) -> dict[str, Any]:
    """Return the contract's `M`."""
    return {
        "id": str(message.id),
        "role": message.role,
        "parts": message.parts,
        "created_at": iso(message.created_at),
        "turn_id": str(message.turn_id),
    }


def turn_json(turn: Turn) -> dict[str, Any]:
    """Return a turn's state as GET messages shows it (an addition to the contract)."""
    failed = turn.status == TurnStatus.FAILED
    return {
        "id": str(turn.id),
        "status": turn.status,
        "error": {"code": turn.error_code, "message": turn.error_message} if failed else None,
    }


def versions_of_message(message: Message, versions: Mapping[uuid.UUID, Any]) -> list[str]:
    """The turns of a transcript message's versions (conversations.versions.Versions), or [] when it has one."""
    found = versions.get(message.turn_id)
    if found is None:
        return []
    return _several(found.messages if message.role == MessageRole.USER else found.answers)


def answer_versions_of(turn: Turn, versions: Mapping[uuid.UUID, Any]) -> list[str]:
    """The turns of the versions of a turn's answer, or [] when it has one."""
    found = versions.get(turn.id)
    return _several(found.answers) if found is not None else []


def _several(turn_ids: list[uuid.UUID]) -> list[str]:
    """Versions as the contract lists them: the turn ids, or none when there is only one."""
    return [str(turn_id) for turn_id in turn_ids] if len(turn_ids) > 1 else []
