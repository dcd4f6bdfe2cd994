"""Versions of messages: Regenerate, Retry and Edit add versions; the owner picks the branch shown.

A conversation's turns form a tree: each turn follows `parent_turn_id`, the head of the
shown branch when it was submitted (`sql.conversation_reserve_turn` sets both). A version
of a turn is a new turn with the same parent: Regenerate and Retry answer the same message
again (`prompt_turn_id` names the turn whose message it is), Edit sends a changed message.
Which branch is shown is kept on the server (`Turn.shown`, the conversation's
`branch_head`), so every tab agrees; the transcript, the model, search, titles and export
read only the shown turns.

At one place of the transcript, the message versions are the different messages sent
there (Edit), and the answer versions the answers to the shown message (Regenerate,
Retry). A failed answer that was answered again is replaced, not offered: Retry after a
failure replaces the failed answer. Versions are added and switched only while nothing
runs in the conversation, so a running turn's branch never changes under it.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from conversations import sql
from conversations.errors import ConversationNotFound
from conversations.eventlog import (
    EventFrame,
    events_append,
    events_insert,
    events_publish_after_commit,
    owner_changed_send,
)
from conversations.events import EventKind, turn_queued_data
from conversations.models import (
    Conversation,
    ConversationState,
    Message,
    MessageRole,
    Turn,
    user_message_ordinal,
)
from conversations.search import message_text, search_index_name
from conversations.serializers import message_json
from conversations.titles import conversation_title_from_text
from conversations.version_tree import TreeTurn, tree_read
from flarebot.core.errors import Conflict, InvalidInput

BUSY = "An answer is still being written. Wait for it to finish (or stop it), then try again."


class BranchBusy(Conflict):
    code = "branch_busy"
    default_message = BUSY


def _locked(conversation_id: uuid.UUID) -> Conversation:
    conversation = (
        Conversation.objects.select_for_update().filter(id=conversation_id, state=ConversationState.ACTIVE).first()
    )
    if conversation is None:
        raise ConversationNotFound()
    return conversation


def _refuse_while_running(conversation_id: uuid.UUID) -> None:
    if sql.turn_first_unfinished(conversation_id=conversation_id) is not None:
        raise BranchBusy()


def _branch_show(conversation_id: uuid.UUID, head: TreeTurn, by_id: dict[uuid.UUID, TreeTurn]) -> None:
    """Mark the branch ending at `head` shown and every other turn hidden."""
    chain: list[uuid.UUID] = []
    turn: TreeTurn | None = head
    while turn is not None:
        chain.append(turn.id)
        turn = by_id.get(turn.parent) if turn.parent else None
    turns = Turn.objects.filter(conversation_id=conversation_id)
    turns.exclude(id__in=chain).filter(shown=True).update(shown=False)
    turns.filter(id__in=chain, shown=False).update(shown=True)
    Conversation.objects.filter(id=conversation_id).update(branch_head=head.id, branch_head_parent=head.parent)


def _switched(turn_id: uuid.UUID) -> tuple[str, uuid.UUID | None, dict[str, str]]:
    return (EventKind.CONVERSATION_BRANCH_SWITCHED, None, {"turn_id": str(turn_id)})


def branch_switch(*, conversation_id: uuid.UUID, turn_id: uuid.UUID) -> tuple[uuid.UUID, list[EventFrame]]:
    """Show the branch through this turn (ending at its newest descendant); return its head and the event.

    Refused while an answer is being written (`branch_busy`); an unknown turn changes nothing.
    """
    with transaction.atomic():
        conversation = _locked(conversation_id)
        _refuse_while_running(conversation_id)
        tree = tree_read(conversation_id=conversation_id)
        by_id = {turn.id: turn for turn in tree}
        if turn_id not in by_id or not by_id[turn_id].asks:
            raise InvalidInput("turn_id: not a message of this conversation.", code="invalid_turn")
        first_before = None if conversation.name_is_custom else _first_shown_text(conversation_id)
        children: dict[uuid.UUID | None, list[TreeTurn]] = defaultdict(list)
        for turn in tree:
            children[turn.parent].append(turn)
        head, below = by_id[turn_id], [by_id[turn_id]]
        while below:
            turn = below.pop()
            head = turn if turn.ordinal > head.ordinal else head
            below.extend(children[turn.id])
        _branch_show(conversation_id, head, by_id)
        _title_from_shown(conversation, first_before=first_before)
        frames = events_append(conversation_id=conversation_id, events=[_switched(head.id)])
    return head.id, frames


def branch_switch_published(*, conversation_id: uuid.UUID, turn_id: uuid.UUID) -> uuid.UUID:
    """`branch_switch`, its event published to the conversation's sockets after commit."""
    head, frames = branch_switch(conversation_id=conversation_id, turn_id=turn_id)
    events_publish_after_commit(conversation_id=conversation_id, frames=frames)
    return head


@dataclass(frozen=True)
class VersionSubmitted:
    turn: Turn
    created: bool
    frames: list[EventFrame]


def turn_submit_version(
    *, conversation_id: uuid.UUID, request_id: uuid.UUID, text: str, version_of: uuid.UUID
) -> VersionSubmitted:
    """Send a message as a new version of a shown turn's: its answer again (same text) or an edit.

    The new turn follows what the original followed and becomes the shown branch's head;
    the original's branch is hidden, kept as a version. A repeated request_id returns the
    turn the first one queued. Refused while an answer is being written. `text` comes
    checked (`turns.user_text_clean`); the caller starts the turn after commit.
    """
    now = timezone.now()
    with transaction.atomic():
        conversation = _locked(conversation_id)
        before = Turn.objects.filter(conversation_id=conversation_id, request_id=request_id).first()
        if before is not None:
            return VersionSubmitted(before, False, [])
        _refuse_while_running(conversation_id)
        original = Turn.objects.filter(id=version_of, conversation_id=conversation_id, shown=True).first()
        asked = (
            Message.objects.filter(turn_id=version_of, role=MessageRole.USER).first() if original is not None else None
        )
        if original is None or asked is None:
            raise InvalidInput("version_of: not a message shown in this conversation.", code="invalid_version")
        first_before = None if conversation.name_is_custom else _first_shown_text(conversation_id)
        same = text == "".join(p.get("text", "") for p in asked.parts if p.get("type") == "text")
        turn_id = uuid.uuid4()
        reserved = sql.conversation_reserve_turn(
            conversation_id=conversation_id, request_id=request_id, turn_id=turn_id, title="", now=now, events=2
        )
        if reserved is None:  # the conversation row is locked and active: only a raced request
            raise ConversationNotFound()
        turn = Turn.objects.create(
            id=turn_id,
            conversation_id=conversation_id,
            request_id=request_id,
            ordinal=reserved.ordinal,
            parent_turn_id=original.parent_turn_id,
            prompt_turn_id=(original.prompt_turn_id or original.id) if same else None,
        )
        # An edit keeps the message's attachments: only its text changes.
        kept = [p for p in asked.parts if p.get("type") == "attachment"]
        parts = asked.parts if same else [{"type": "text", "text": text}, *kept]
        message = Message.objects.create(
            conversation_id=conversation_id,
            turn=turn,
            role=MessageRole.USER,
            ordinal=user_message_ordinal(reserved.ordinal),
            parts=parts,
        )
        Turn.objects.filter(conversation_id=conversation_id, shown=True, ordinal__gte=original.ordinal).exclude(
            id=turn_id
        ).update(shown=False)
        Conversation.objects.filter(id=conversation_id).update(branch_head_parent=original.parent_turn_id)
        _title_from_shown(conversation, first_before=first_before)
        queued = turn_queued_data(request_id=request_id, message=message_json(message))
        frames = events_insert(
            [(conversation_id, reserved.sequence, [_switched(turn_id), (EventKind.TURN_QUEUED, turn_id, queued)])]
        )
    return VersionSubmitted(turn, True, frames)


def _first_shown_text(conversation_id: uuid.UUID) -> str | None:
    """The text of the shown branch's first message, or None when it has none."""
    first = (
        Message.objects.filter(conversation_id=conversation_id, role=MessageRole.USER, turn__shown=True)
        .order_by("ordinal")
        .values_list("parts", flat=True)
        .first()
    )
    return None if first is None else message_text(first)


def _title_from_shown(conversation: Conversation, *, first_before: str | None) -> None:
    """Title the conversation after the shown branch's first message, if that message changed
    (from `first_before`) and the owner never named it.

    The model names it again after the new branch's next answer (`conversations.titling`); a
    branch that begins with the same message keeps the title it has.
    """
    if conversation.name_is_custom:
        return
    first = _first_shown_text(conversation.id)
    if first is None or first == first_before:
        return
    title = conversation_title_from_text(first)
    Conversation.objects.filter(id=conversation.id).update(name=title, titled_at=None)
    if title != conversation.name:
        search_index_name(conversation_id=conversation.id, name=title)
        transaction.on_commit(lambda: owner_changed_send(conversation_id=conversation.id, listed=True))
