"""Clearing a conversation's history: everything shown goes, the conversation and its name stay.

Lowest first, as a teardown: the active turn and an unfinished browser task are stopped
(each keeps nothing: their output goes with the rest), every tool releases what it holds
for the conversation (containers, browser contexts a task kept). Then one transaction, under
the conversation's row lock (which a submit also takes), removes its messages, tool
activities, sources (parts of the messages), attachments (and their blobs no other
row names), message search entries, proposals, browser
tasks and events, and leaves each turn as an id-only tombstone (its id, request id and
ordinal, so a replayed `user_message` is still recognised). One `conversation.cleared`
event, with the next sequence, tells every tab to start over.

Nothing is removed while an answer still runs: when the turn does not stop in time, the
clear is refused (409 `clear_busy`) and may be tried again.
"""

from __future__ import annotations

import uuid

from django.db import transaction
from django.utils import timezone

from attachments.services import attachments_delete
from conversations import sql
from conversations.browser_tasks.lifecycle import browser_tasks_stop_for_deletion
from conversations.errors import ConversationNotFound
from conversations.eventlog import events_append_published
from conversations.events import EventKind
from conversations.models import (
    BrowserTask,
    BrowserTaskProposal,
    Conversation,
    ConversationState,
    Event,
    Message,
    SearchEntry,
    Turn,
    TurnStatus,
)
from conversations.selectors import conversation_require_active
from conversations.turns import UNFINISHED, turns_stop_for_deletion, turns_wait_stopped
from flarebot.core.errors import Conflict
from tools.activity import activities_delete
from tools.proposals import write_proposals_delete
from tools.registry import GRACE
from tools.services import tools_release_conversation

# How long a clear waits for the running answer and browser task to stop.
STOP_TIMEOUT = GRACE + 5.0
BUSY = "The answer or browser task is still stopping; nothing was cleared. Try again in a moment."


class ClearBusy(Conflict):
    code = "clear_busy"
    default_message = BUSY


def conversation_clear(*, conversation_id: uuid.UUID) -> Conversation:
    """Remove a conversation's history (stopping what runs first) and announce it; return the conversation."""
    conversation_require_active(conversation_id=conversation_id)
    turns_stop_for_deletion(conversation_id=conversation_id)
    if not turns_wait_stopped(conversation_id=conversation_id, timeout=STOP_TIMEOUT):
        raise ClearBusy()
    if not browser_tasks_stop_for_deletion(conversation_id=conversation_id, timeout=STOP_TIMEOUT):
        raise ClearBusy()
    if not tools_release_conversation(conversation_id=conversation_id):
        raise ClearBusy("A tool could not release what it held for this conversation; nothing was cleared. Try again.")
    with transaction.atomic():
        conversation = (
            Conversation.objects.select_for_update().filter(id=conversation_id, state=ConversationState.ACTIVE).first()
        )
        if conversation is None:
            raise ConversationNotFound()
        if sql.turns_held(conversation_id=conversation_id, now=timezone.now()):
            raise ClearBusy()  # a message sent meanwhile started an answer
        _history_remove(conversation_id)
        events_append_published(conversation_id=conversation_id, events=[(EventKind.CONVERSATION_CLEARED, None, {})])
    return conversation


def _history_remove(conversation_id: uuid.UUID) -> None:
    now = timezone.now()
    turns = Turn.objects.filter(conversation_id=conversation_id)
    # A turn sent while the clear waited never runs: it ends here, with everything else.
    turns.filter(status__in=UNFINISHED).update(
        status=TurnStatus.CANCELLED, cancel_requested=True, finished_at=now, lease_token="", lease_expires_at=None
    )
    turns.update(provider="", model="", error_code="", error_message="", shown=False)
    # What is sent next starts a new tree of versions.
    Conversation.objects.filter(id=conversation_id).update(branch_head=None, branch_head_parent=None)
    SearchEntry.objects.filter(conversation_id=conversation_id, message__isnull=False).delete()
    Event.objects.filter(conversation_id=conversation_id).delete()
    attachments_delete(conversation_id=conversation_id)  # sent or not; blobs go after commit
    Message.objects.filter(conversation_id=conversation_id).delete()
    activities_delete(conversation_id=conversation_id)
    write_proposals_delete(conversation_id=conversation_id)
    BrowserTask.objects.filter(conversation_id=conversation_id).delete()
    BrowserTaskProposal.objects.filter(conversation_id=conversation_id).delete()
