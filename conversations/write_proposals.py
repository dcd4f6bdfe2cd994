"""The conversation's side of proposed writes: the owner decides, every tab and the model learn it.

A conversation that holds untrusted content (a web tool's output, a browser task's pages)
has its memory and task writes proposed instead of done (`tools.proposals`). Here the
owner's Confirm or Dismiss is taken, in one transaction with its `write_proposal.updated`
event, and later turns' models see each proposal as it was decided, not as it was asked.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from attachments.models import Attachment
from conversations.eventlog import events_append_published
from conversations.events import write_proposal_updated
from conversations.models import BrowserTask, Conversation
from conversations.selectors import conversation_require_active
from tools.models import WriteProposal, WriteProposalState
from tools.proposals import ProposalJson, proposal_json, write_proposal_decide

NEEDS_CONFIRMATION = "needs_confirmation"


def conversation_has_read_untrusted(*, conversation_id: uuid.UUID) -> bool:
    """Whether the model of this conversation may have been steered by content from outside.

    Anything a web tool read (or a file attached to a message) stays in the transcript every
    later turn sends, and a browser task's outcome was written by a model that read its
    pages: from the first such call, file or task on, the conversation's writes outside the
    turn are proposals. A call that reads outside content marks the conversation before it
    runs (`conversation_untrusted_mark`): a fact of its own, which no later call's record
    can overwrite.
    """
    return (
        Conversation.objects.filter(id=conversation_id, untrusted_read_at__isnull=False).exists()
        or BrowserTask.objects.filter(conversation_id=conversation_id).exists()
        # A file sent to the model may hold words written elsewhere (a downloaded PDF).
        or Attachment.objects.filter(conversation_id=conversation_id, message__isnull=False).exists()
    )


def conversation_untrusted_mark(*, conversation_id: uuid.UUID) -> None:
    """Record that a call of this conversation is about to read content from outside (the first time counts)."""
    Conversation.objects.filter(id=conversation_id, untrusted_read_at__isnull=True).update(
        untrusted_read_at=timezone.now()
    )


def write_proposal_answer(*, conversation_id: uuid.UUID, proposal_id: uuid.UUID, confirm: bool) -> ProposalJson:
    """Take the owner's decision on a proposed write of this conversation; every tab hears it."""
    with transaction.atomic():
        conversation_require_active(conversation_id=conversation_id)
        proposal = write_proposal_decide(proposal_id=proposal_id, conversation_id=conversation_id, confirm=confirm)
        shown = proposal_json(proposal)
        events = [write_proposal_updated(turn_id=proposal.turn_id, proposal=dict(shown))]
        events_append_published(conversation_id=conversation_id, events=events)
    return shown


def messages_with_decisions(*, conversation_id: uuid.UUID, transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with each proposed write's tool output as the owner decided it.

    For the model of later turns, and for a page that loads the transcript (the decision's
    event may be older than what it replays). The parts are changed in place.
    """
    asked = [
        part
        for message in transcript
        for part in message["parts"]
        if part.get("type") == "tool"
        and isinstance(part.get("output"), dict)
        and part["output"].get("error") == NEEDS_CONFIRMATION
    ]
    if not asked:
        return transcript
    decided = {
        str(proposal.id): proposal
        for proposal in WriteProposal.objects.filter(conversation_id=conversation_id).exclude(
            state=WriteProposalState.PROPOSED
        )
    }
    for part in asked:
        proposal = decided.get(str(part["output"].get("proposal", {}).get("id")))
        if proposal is not None:
            part["output"] = {**part["output"], "proposal": proposal_json(proposal)}
            part["output"]["message"] = _decided_message(proposal)
    return transcript


def _decided_message(proposal: WriteProposal) -> str:
    if proposal.state == WriteProposalState.DISMISSED:
        return "The owner dismissed this on its card: it was not done."
    return "The owner confirmed this on its card and it was done; its outcome is in proposal.result."


def write_proposals_of(*, conversation_id: uuid.UUID) -> list[ProposalJson]:
    """The conversation's proposed writes, oldest first (a reloaded page's cards)."""
    return [
        proposal_json(p) for p in WriteProposal.objects.filter(conversation_id=conversation_id).order_by("created_at")
    ]
