"""Writes to conversations: create, rename, and the two-phase delete.

Deleting first makes a conversation inaccessible (state `deleting`, sockets closed with
4004), then tears its data down in a job. A teardown that was interrupted is finished by
the sweep at worker start and on beat, or by the owner deleting again.
"""

from __future__ import annotations

import logging
import uuid

from asgiref.sync import async_to_sync
from celery import current_app
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from attachments.services import attachments_delete
from conversations.browser_tasks.lifecycle import browser_tasks_stop_for_deletion
from conversations.errors import ConversationNotFound
from conversations.eventlog import owner_changed_send
from conversations.events import ConversationDeleted, conversation_group
from conversations.models import Conversation, ConversationState
from conversations.search import search_index_name
from conversations.selectors import conversations_unread
from conversations.signals import conversation_torn_down
from conversations.titles import DEFAULT_NAME
from conversations.turns import turns_stop_for_deletion, turns_wait_stopped
from flarebot.core.errors import InvalidInput
from flarebot.core.text import has_control_characters, has_disguising_characters, utf16_length
from tools.activity import activities_delete
from tools.proposals import write_proposals_delete
from tools.registry import GRACE
from tools.services import tools_release_conversation

logger = logging.getLogger(__name__)

NAME_MAX_UTF16 = 120
# How long a teardown waits for the conversation's running turns to stop their tool calls.
TURNS_STOP_TIMEOUT = GRACE + 5.0


def conversation_name_clean(raw: str) -> str:
    """Check a name against the contract and return it trimmed."""
    length = utf16_length(raw)
    if length < 1 or length > NAME_MAX_UTF16:
        raise InvalidInput(f"name: must be 1-{NAME_MAX_UTF16} characters (UTF-16 code units).", code="invalid_name")
    if has_control_characters(raw):
        raise InvalidInput("name: must not contain control characters.", code="invalid_name")
    if has_disguising_characters(raw):
        raise InvalidInput("name: must not contain direction controls or invisible characters.", code="invalid_name")
    trimmed = raw.strip()
    if not trimmed:
        raise InvalidInput("name: must not be blank.", code="invalid_name")
    return trimmed


def conversation_create(*, name: str | None = None) -> Conversation:
    """Create a conversation with the owner's name, or untitled until its first message."""
    if name is None:
        return Conversation.objects.create(name=DEFAULT_NAME, name_is_custom=False)
    with transaction.atomic():
        conversation = Conversation.objects.create(name=conversation_name_clean(name), name_is_custom=True)
        search_index_name(conversation_id=conversation.id, name=conversation.name)
    return conversation


def conversation_rename(*, conversation_id: uuid.UUID, name: str) -> Conversation:
    """Give an active conversation the owner's name; an unknown or deleted one is NotFound.

    Its place in the list stays: `updated_at` moves with messages, not with names. Every tab
    hears the new name (`conversation_changed`).
    """
    cleaned = conversation_name_clean(name)
    with transaction.atomic():
        renamed = Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE).update(
            name=cleaned, name_is_custom=True
        )
        if not renamed:
            raise ConversationNotFound()
        search_index_name(conversation_id=conversation_id, name=cleaned)
        transaction.on_commit(lambda: owner_changed_send(conversation_id=conversation_id, listed=True))
        return Conversation.objects.get(id=conversation_id)


def conversation_read(*, conversation_id: uuid.UUID, sequence: int) -> Conversation:
    """Move the owner's read mark of an active conversation up to `sequence`; return it with its `unread`.

    The mark never moves back (tabs race: an older mark changes nothing and is no error);
    a sequence past the conversation's last event is refused, as no page can have shown it.
    One conditional update, without the row lock the event log's writers take.
    """
    moved = Conversation.objects.filter(
        id=conversation_id,
        state=ConversationState.ACTIVE,
        read_sequence__lt=sequence,
        last_sequence__gte=sequence,
    ).update(read_sequence=sequence, read_at=timezone.now())
    conversation = conversations_unread(
        Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE)
    ).first()
    if conversation is None:
        raise ConversationNotFound()
    if not moved and sequence > conversation.last_sequence:
        raise InvalidInput(
            f"sequence: the conversation's events end at {conversation.last_sequence}.", code="invalid_sequence"
        )
    if moved:
        transaction.on_commit(lambda: owner_changed_send(conversation_id=conversation_id, attention=True))
    return conversation


def conversation_delete(*, conversation_id: uuid.UUID) -> None:
    """Make a conversation inaccessible now and tear it down in the background; idempotent."""
    with transaction.atomic():
        Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE).update(
            state=ConversationState.DELETING, deletion_requested_at=timezone.now()
        )
        if not Conversation.objects.filter(id=conversation_id).exists():
            return
        transaction.on_commit(lambda: _after_delete_committed(conversation_id))


def _after_delete_committed(conversation_id: uuid.UUID) -> None:
    try:
        async_to_sync(get_channel_layer().group_send)(
            conversation_group(conversation_id), ConversationDeleted(type="conversation.deleted")
        )
    except Exception:
        # The conversation is already inaccessible; open sockets are closed when their
        # next frame or event finds it gone.
        logger.warning("could not notify sockets of deleted conversation %s", conversation_id, exc_info=True)
    current_app.send_task("conversations.jobs.conversation_teardown", args=[str(conversation_id)])


def conversation_teardown(*, conversation_id: uuid.UUID) -> bool:
    """Tear down the data of a conversation marked for deletion; return whether it is gone now.

    Lowest first: running turns stop, and their tool calls with them (each call's cleanup
    hook runs in its worker, within its grace), browser tasks are cancelled and their
    checkpoints erased, then every tool releases what it still holds for the conversation
    (containers, browsers, the contexts browser tasks kept). Only then do the rows go: a tool that could
    not release leaves the conversation for the deletion sweep, which tries again.
    """
    conversation = Conversation.objects.filter(id=conversation_id, state=ConversationState.DELETING).first()
    if conversation is None:
        return False
    turns_stop_for_deletion(conversation_id=conversation_id)
    if not turns_wait_stopped(conversation_id=conversation_id, timeout=TURNS_STOP_TIMEOUT):
        logger.warning("turns of deleted conversation %s did not stop in time; releasing its tools", conversation_id)
    # Browser tasks are cancelled and their checkpoints erased; their contexts (running or
    # kept) are closed with every other browser context of the conversation just below.
    if not browser_tasks_stop_for_deletion(conversation_id=conversation_id, timeout=TURNS_STOP_TIMEOUT):
        logger.warning("browser tasks of deleted conversation %s did not stop in time", conversation_id)
    if not tools_release_conversation(conversation_id=conversation_id):
        return False
    activities_delete(conversation_id=conversation_id)
    write_proposals_delete(conversation_id=conversation_id)
    attachments_delete(conversation_id=conversation_id)
    conversation_torn_down.send(sender=Conversation, conversation_id=conversation_id)
    Conversation.objects.filter(id=conversation_id, state=ConversationState.DELETING).delete()
    return True


def conversations_finish_deletions() -> int:
    """Finish every interrupted deletion; return how many were finished."""
    pending = Conversation.objects.filter(state=ConversationState.DELETING).values_list("id", flat=True)
    return sum(conversation_teardown(conversation_id=conversation_id) for conversation_id in list(pending))
