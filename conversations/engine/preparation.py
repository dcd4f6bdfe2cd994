"""What an attempt of a turn starts from, read in one go from the database."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction
from django.utils import timezone

from attachments.content import transcript_with_attachments
from conversations.engine.tool_calls import rerun_calls_of
from conversations.eventlog import EventFrame, events_append
from conversations.events import NewEvent, activity_events, message_replaced, tool_finished
from conversations.model_settings import TurnModel, turn_model_snapshot
from conversations.models import Message, MessageRole, Turn, answer_ordinal, user_message_ordinal
from conversations.providers.base import INTERRUPTED_OUTPUT, ToolCall
from conversations.sql import transcript_until
from conversations.turns import Claim, turn_attempt_restart, turn_claim
from conversations.write_proposals import messages_with_decisions
from memory.selectors import memory_prompt_block
from tools.activity import activities_interrupt
from tools.registry import Effect, tool_get

logger = logging.getLogger(__name__)


@dataclass
class Prepared:
    model: TurnModel
    system: str  # the instructions, then the selected memory facts
    transcript: list[dict[str, Any]]
    assistant_message_id: uuid.UUID
    parts: list[dict[str, Any]]
    steps: int
    cancel_requested: bool
    frames: list[EventFrame]  # to publish: what resuming changed in the earlier parts
    rerun: list[ToolCall]  # `read` calls a crash cut off, to run again before the next step


Started = tuple[Claim, Prepared]


def attempt_start(turn_id: uuid.UUID) -> Started | None:
    """Claim a turn and prepare its attempt in one transaction (the hot path).

    The memory facts for the latest message are read once that transaction ended (so
    the selection never holds the turn's row), in the same call: one trip to a database
    thread before the model is asked.
    """
    with transaction.atomic():
        claimed = _claim_and_prepare(turn_id, turn_model_snapshot())
    return None if claimed is None else _completed(*claimed)


def attempts_start(turn_ids: Sequence[uuid.UUID]) -> list[Started | Exception | None]:
    """`attempt_start` for turns that rang together, in one transaction: each turn's outcome, in order.

    A burst's starts then cost one settings read and one commit in all, not one of each
    per turn. The memory facts and attachments are read after the commit, per turn, as
    `attempt_start` reads them. Optimistic, like the streamed writes' batches: when any
    start fails, the whole transaction is rolled back and each turn is started alone, so
    that a turn's failure is its own (its exception is its outcome). A turn listed twice
    is started once; its second place gets None, as a second claim would.
    """
    if len(turn_ids) == 1:
        return [_outcome(attempt_start, turn_ids[0])]
    try:
        with transaction.atomic():
            model = turn_model_snapshot()
            # Rows are locked in one order in every batch, so two batches never wait on each other.
            claimed = {turn_id: _claim_and_prepare(turn_id, model) for turn_id in sorted(set(turn_ids))}
    except Exception:
        logger.warning("a batch of %d turn starts failed; starting each alone", len(turn_ids), exc_info=True)
        claimed = None
    outcomes: list[Started | Exception | None] = []
    seen: set[uuid.UUID] = set()
    for turn_id in turn_ids:
        if turn_id in seen:
            outcomes.append(None)
        elif claimed is None:
            outcomes.append(_outcome(attempt_start, turn_id))
        else:
            started = claimed[turn_id]
            outcomes.append(None if started is None else _outcome(_completed, *started))
        seen.add(turn_id)
    return outcomes


def _claim_and_prepare(turn_id: uuid.UUID, model: TurnModel) -> Started | None:
    """Inside the caller's transaction: claim the turn, then read what its attempt starts from."""
    claim = turn_claim(turn_id=turn_id, provider=model.provider, model=model.model)
    if claim is None:
        return None
    # The claim holds the turn's row lock and found no cancel request.
    first = claim.attempt == 1
    return claim, _prepare(claim, model=model, first_attempt=first, steps=claim.steps, cancel=False)


def _completed(claim: Claim, prepared: Prepared) -> Started:
    """After the commit: the memory facts and the attachments' content (neither holds the turn's row)."""
    return claim, _with_attachments(claim, _with_memory(prepared))


def _outcome(start: Callable[..., Started | None], *args: Any) -> Started | Exception | None:
    try:
        return start(*args)
    except Exception as error:  # the caller waiting for this turn raises it
        return error


def attempt_restart(claim: Claim) -> Started | None:
    """Start and prepare the next attempt of a turn whose attempt stalled; None when it may not."""
    model = turn_model_snapshot()
    with transaction.atomic():
        again = turn_attempt_restart(claim=claim, provider=model.provider, model=model.model)
        if again is None:
            return None
        prepared = _prepare(again, model=model, first_attempt=False)
    return again, _with_attachments(again, _with_memory(prepared))


def _with_memory(prepared: Prepared) -> Prepared:
    """The instructions followed by the memory facts that the latest user message selects."""
    return replace(prepared, system=prepared.system + memory_prompt_block(text=last_user_text(prepared.transcript)))


def _with_attachments(claim: Claim, prepared: Prepared) -> Prepared:
    """The transcript with its attachments' content, as this turn hands them to its model (read off the lock)."""
    transcript = transcript_with_attachments(
        turn_id=claim.turn_id,
        conversation_id=claim.conversation_id,
        provider=prepared.model.provider,
        transcript=prepared.transcript,
    )
    return replace(prepared, transcript=transcript)


def _prepare(
    claim: Claim,
    *,
    model: TurnModel,
    first_attempt: bool,
    steps: int | None = None,
    cancel: bool | None = None,
) -> Prepared:
    """Read the transcript and this turn's answer so far, inside the caller's transaction."""
    if steps is None or cancel is None:
        steps, cancel = Turn.objects.filter(id=claim.turn_id).values_list("steps", "cancel_requested").get()
    fields: dict[str, Any] = {
        "conversation_id": claim.conversation_id,
        "ordinal": answer_ordinal(claim.ordinal),
        "parts": [],
    }
    assistant_id: uuid.UUID
    if first_attempt:
        now, assistant_id = timezone.now(), uuid.uuid4()
        answer = {"id": assistant_id, "turn_id": claim.turn_id, "role": MessageRole.ASSISTANT.value, **fields}
        answer |= {"created_at": now, "updated_at": now}
        transcript = transcript_until(
            conversation_id=claim.conversation_id, ordinal=user_message_ordinal(claim.ordinal), answer=answer
        )
        parts: list[dict[str, Any]] = []
    else:
        transcript = transcript_until(
            conversation_id=claim.conversation_id, ordinal=user_message_ordinal(claim.ordinal)
        )
        assistant, _ = Message.objects.get_or_create(turn_id=claim.turn_id, role=MessageRole.ASSISTANT, defaults=fields)
        assistant_id, parts = assistant.id, list(assistant.parts)
    transcript = messages_with_decisions(conversation_id=claim.conversation_id, transcript=transcript)
    parts, events = _resume_parts(parts, turn_id=claim.turn_id, steps=steps)
    if not first_attempt:
        events += activity_events(claim.turn_id, activities_interrupt(turn_id=claim.turn_id))
    frames: list[EventFrame] = []
    if events:
        Message.objects.filter(id=assistant_id).update(parts=parts)
        frames = events_append(conversation_id=claim.conversation_id, events=events)
    return Prepared(
        model=model,
        system=model.instructions,
        transcript=transcript,
        assistant_message_id=assistant_id,
        parts=parts,
        steps=steps,
        cancel_requested=cancel,
        frames=frames,
        rerun=rerun_calls_of(parts),
    )


def last_user_text(transcript: list[dict[str, Any]]) -> str:
    """Return the text of the transcript's last user message (what picks a turn's memory facts)."""
    for message in reversed(transcript):
        if message["role"] == MessageRole.USER:
            return "".join(part["text"] for part in message["parts"] if part["type"] == "text")
    return ""


def _resume_parts(
    parts: list[dict[str, Any]], *, turn_id: uuid.UUID, steps: int
) -> tuple[list[dict[str, Any]], list[NewEvent]]:
    """Make an earlier attempt's parts safe to continue from, with the events that say so.

    - A tool call cut off by a crash has no output. A `read` call keeps none: it is run
      again (`Prepared.rerun`). Any other call's outcome is recorded as unknown, and
      clients that showed it running (tool.started) learn how it ended; it never runs again.
    - Text of a step that never finished is dropped, so the retried step does not repeat
      it after itself; `message.replaced` gives clients the parts to show instead.
    """
    events: list[NewEvent] = []
    resumed: list[dict[str, Any]] = []
    for part in parts:
        if part["type"] == "tool" and part.get("output") is None and not _runs_again(part["name"]):
            part = {**part, "output": INTERRUPTED_OUTPUT, "status": "interrupted"}
            events.append(
                tool_finished(
                    turn_id,
                    tool_call_id=part["tool_call_id"],
                    name=part["name"],
                    status="interrupted",
                    output=INTERRUPTED_OUTPUT,
                )
            )
        if part["type"] == "text" and part.get("step", -1) >= steps:
            continue
        resumed.append(part)
    if len(resumed) != len(parts):
        events.append(message_replaced(turn_id, parts=resumed))
    return resumed, events


def _runs_again(name: str) -> bool:
    """Whether recovery may run a call of this tool again: only `read` tools, and only known ones."""
    tool = tool_get(name)
    return tool is not None and tool.effect == Effect.READ
