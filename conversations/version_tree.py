"""The tree of a conversation's turns, read: which versions each shown message and answer has.

The rules are `conversations.versions`'s; this is its read side, apart so that the
transcript's selectors read it without importing the services.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from conversations.models import Message, MessageRole, Turn, TurnStatus


@dataclass(frozen=True)
class TreeTurn:
    id: uuid.UUID
    parent: uuid.UUID | None
    prompt: uuid.UUID | None
    ordinal: int
    status: str
    shown: bool
    asks: bool  # carries a message of the owner's (a browser task's outcome does not)

    @property
    def message_root(self) -> uuid.UUID:
        """The turn whose user message this turn answers."""
        return self.prompt or self.id


@dataclass(frozen=True)
class Versions:
    messages: list[uuid.UUID]  # one turn per message sent at this place; the shown turn for its own
    answers: list[uuid.UUID]  # the turns answering the shown message


def tree_read(*, conversation_id: uuid.UUID) -> list[TreeTurn]:
    """The conversation's turns, in order."""
    asks = Message.objects.filter(turn_id=OuterRef("id"), role=MessageRole.USER)
    rows = (
        Turn.objects.filter(conversation_id=conversation_id)
        .annotate(asks=Exists(asks))
        .order_by("ordinal")
        .values_list("id", "parent_turn_id", "prompt_turn_id", "ordinal", "status", "shown", "asks")
    )
    return [TreeTurn(*row) for row in rows]


def _offered(group: list[TreeTurn], shown: uuid.UUID) -> list[TreeTurn]:
    """The answers offered as versions: a failed one is left out once a later one answers again."""
    return [
        turn
        for i, turn in enumerate(group)
        if turn.id == shown or turn.status != TurnStatus.FAILED or i == len(group) - 1
    ]


def transcript_versions(*, conversation_id: uuid.UUID) -> dict[uuid.UUID, Versions]:
    """For each shown turn with more than one version of its message or answer: the versions."""
    tree = [turn for turn in tree_read(conversation_id=conversation_id) if turn.asks]
    places: dict[uuid.UUID | None, list[TreeTurn]] = defaultdict(list)
    for turn in tree:
        places[turn.parent].append(turn)
    found: dict[uuid.UUID, Versions] = {}
    for turn in tree:
        place = places[turn.parent]
        if not turn.shown or len(place) < 2:
            continue
        groups: dict[uuid.UUID, list[TreeTurn]] = defaultdict(list)
        for sibling in place:
            groups[sibling.message_root].append(sibling)
        answers = [t.id for t in _offered(groups[turn.message_root], turn.id)]
        messages = [
            turn.id if root == turn.message_root else _offered(group, turn.id)[-1].id for root, group in groups.items()
        ]
        if len(messages) > 1 or len(answers) > 1:
            found[turn.id] = Versions(messages=messages, answers=answers)
    return found
