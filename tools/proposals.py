"""Writes a tainted turn asked for, held until the owner confirms them.

A conversation whose model saw untrusted content (`ToolContext.untrusted_read`) may have
been steered by it: a page can tell the model to schedule a task that reads a collect URL
every minute, or to remember something for every future prompt. In such a conversation
the memory and task tools do not write: they call `write_propose`, which stores the call
(its tool, its input exactly as the model gave it, and a readback for the owner's card)
and tells the model it waits for the owner. The owner's Confirm runs the write through the
tool's declared `write_confirmed` (found through the registry, so this app never imports an
upper one), once; Dismiss writes nothing. A replayed call finds its
proposal. The conversation side (the card's event, the transcript) is
`conversations.write_proposals`.
"""

from __future__ import annotations

from typing import Any, TypedDict

from django.db import IntegrityError, transaction
from django.utils import timezone

from flarebot.core.database import db
from flarebot.core.errors import Conflict, NotFound
from tools.kit import call_check, refusal, stopped_check
from tools.models import WriteProposal, WriteProposalState
from tools.registry import ToolContext, tool_get

READBACK_LINES_MAX = 12
READBACK_LINE_MAX = 1_200
WAITING_MESSAGE = (
    "Not done yet: this conversation holds content from the web, which may have steered this request, so the "
    "owner confirms it on its card first. Tell the owner it waits for their confirmation; do not call it again."
)


class Readback(TypedDict):
    title: str
    lines: list[str]


class ProposalJson(TypedDict):
    id: str
    tool: str
    tool_call_id: str
    turn_id: str
    state: str
    readback: Readback
    result: dict[str, Any] | None
    created_at: str
    decided_at: str | None


def readback_of(title: str, lines: list[str]) -> Readback:
    """A card's readback: a title and a few lines, bounded."""
    return {"title": title[:200], "lines": [line[:READBACK_LINE_MAX] for line in lines[:READBACK_LINES_MAX]]}


def proposal_json(proposal: WriteProposal) -> ProposalJson:
    return {
        "id": str(proposal.id),
        "tool": proposal.tool,
        "tool_call_id": proposal.tool_call_id,
        "turn_id": str(proposal.turn_id),
        "state": proposal.state,
        "readback": proposal.readback,
        "result": proposal.result,
        "created_at": proposal.created_at.isoformat().replace("+00:00", "Z"),
        "decided_at": proposal.decided_at.isoformat().replace("+00:00", "Z") if proposal.decided_at else None,
    }


def _propose(context: ToolContext, tool: str, data: dict[str, Any], readback: Readback) -> WriteProposal:
    call_check(context, nothing_was="proposed")
    try:
        with transaction.atomic():
            proposal, _ = WriteProposal.objects.get_or_create(
                turn_id=context.turn_id,
                tool_call_id=context.tool_call_id[:128],
                defaults={
                    "conversation_id": context.conversation_id,
                    "tool": tool,
                    "input": data,
                    "readback": readback,
                },
            )
    except IntegrityError:  # a replay raced its first call: the first one's proposal stands
        proposal = WriteProposal.objects.get(turn_id=context.turn_id, tool_call_id=context.tool_call_id[:128])
    return proposal


async def write_propose(context: ToolContext, *, tool: str, data: dict[str, Any], readback: Readback) -> dict[str, Any]:
    """Store the write for the owner's confirmation instead of doing it; the tool's result says so."""
    stopped_check(context, nothing_was="proposed")
    proposal = await db(_propose)(context, tool, data, readback)
    return refusal("needs_confirmation", WAITING_MESSAGE, proposal=proposal_json(proposal))


def write_proposal_decide(*, proposal_id: Any, conversation_id: Any, confirm: bool) -> WriteProposal:
    """Confirm (run the write, once) or dismiss a waiting proposal of this conversation."""
    with transaction.atomic():
        proposal = (
            WriteProposal.objects.select_for_update().filter(id=proposal_id, conversation_id=conversation_id).first()
        )
        if proposal is None:
            raise NotFound("There is no such proposal in this conversation.", code="proposal_not_found")
        if proposal.state != WriteProposalState.PROPOSED:
            raise Conflict(f"This proposal was {proposal.state} already.", code=f"proposal_{proposal.state}")
        if confirm:
            tool = tool_get(proposal.tool)
            if tool is None or tool.write_confirmed is None:
                raise Conflict("This kind of proposal can no longer be confirmed.", code="proposal_unknown")
            proposal.result = tool.write_confirmed(
                conversation_id=proposal.conversation_id, tool_call_id=proposal.tool_call_id, data=proposal.input
            )
        proposal.state = WriteProposalState.CONFIRMED if confirm else WriteProposalState.DISMISSED
        proposal.decided_at = timezone.now()
        proposal.save(update_fields=["state", "result", "decided_at", "updated_at"])
    return proposal


def write_proposals_delete(*, conversation_id: Any) -> None:
    """Forget a conversation's proposals (it is deleted or cleared)."""
    WriteProposal.objects.filter(conversation_id=conversation_id).delete()
