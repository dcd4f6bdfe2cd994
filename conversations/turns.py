"""Turn services: submit, cancel, claim, finish and reconcile.

A turn is claimed with a conditional update under a row lock and owned through its lease;
a duplicate delivery that finds a live lease leaves at once. Turns of one conversation run
in ordinal order: a turn is claimable only when no earlier turn is unfinished.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from conversations import turn_rows
from conversations.engine.cancel_bus import publish_cancel
from conversations.engine.doorbell import doorbell_ring, durable_send_later
from conversations.eventlog import EventFrame, NewEvent, event_frame_of, events_append, events_publish_sync
from conversations.models import (
    TERMINAL_TURN_STATUSES,
    Conversation,
    ConversationState,
    Event,
    Message,
    MessageRole,
    Turn,
    TurnStatus,
)
from conversations.titles import conversation_title_from_text
from flarebot.core.errors import InvalidInput, NotFound
from flarebot.core.rows import rows_insert, rows_update
from flarebot.core.text import utf16_length
from flarebot.core.times import iso
from tools.activity import ActivityJson, activities_interrupt

MAX_TEXT_UTF16 = 32_000
LEASE = timedelta(seconds=30)
MAX_ATTEMPTS_WITHOUT_PROGRESS = 3
# A turn that keeps crashing after some progress each time still ends.
MAX_ATTEMPTS = 10
STALE_QUEUED = timedelta(seconds=20)
UNFINISHED = (TurnStatus.QUEUED, TurnStatus.RUNNING)


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


def user_text_clean(text: str) -> str:
    """Check a user message: 1-32,000 characters (UTF-16 code units), no NUL."""
    if not 1 <= utf16_length(text) <= MAX_TEXT_UTF16:
        raise InvalidInput(f"text: must be 1-{MAX_TEXT_UTF16} characters.", code="invalid_text")
    if "\x00" in text:
        raise InvalidInput("text: must not contain NUL characters.", code="invalid_text")
    if not text.strip():
        raise InvalidInput("text: must not be blank.", code="invalid_text")
    return text


def enqueue_turn(turn_id: uuid.UUID) -> None:
    """Start a turn: the doorbell is the fast lane, the Celery task (a moment later) the durable one."""
    doorbell_ring(turn_id)
    durable_send_later(turn_id)


def _after_commit(conversation_id: uuid.UUID, frames: list[EventFrame], *, run: uuid.UUID | None = None) -> None:
    def announce() -> None:
        # The worker first: publishing hops to the web process's event loop, which a
        # burst of messages keeps busy, and the turn need not wait for that.
        if run is not None:
            enqueue_turn(run)
        events_publish_sync(conversation_id=conversation_id, frames=frames)

    transaction.on_commit(announce)


@dataclass(frozen=True)
class Submitted:
    turn: Turn
    created: bool
    frames: list[EventFrame]  # turn.queued, committed, for the caller to publish


def turn_submit(*, conversation_id: uuid.UUID, request_id: uuid.UUID, text: str) -> tuple[Turn, bool]:
    """Store the user's message and a queued turn; a repeated request_id returns the same turn."""
    submitted = turn_submit_unpublished(conversation_id=conversation_id, request_id=request_id, text=text)
    transaction.on_commit(lambda: events_publish_sync(conversation_id=conversation_id, frames=submitted.frames))
    return submitted.turn, submitted.created


def turn_submit_unpublished(*, conversation_id: uuid.UUID, request_id: uuid.UUID, text: str) -> Submitted:
    """Submit a turn and leave publishing turn.queued to the caller (a socket, on its own loop).

    The conversation moves to the top of the list; its first turn titles it, unless the
    owner named it (both in the statement that reserves the turn).
    """
    user_text_clean(text)
    now = timezone.now()
    title = conversation_title_from_text(text)
    turn = {"id": uuid.uuid4(), "conversation_id": conversation_id, "request_id": request_id}
    message = {
        "id": uuid.uuid4(),
        "conversation_id": conversation_id,
        "turn_id": turn["id"],
        "role": MessageRole.USER.value,
        "parts": [{"type": "text", "text": text}],
        "created_at": now,
        "updated_at": now,
    }
    queued = {"request_id": str(request_id), "message": message_json(Message(**message))}
    event = {"conversation_id": conversation_id, "kind": "turn.queued", "turn_id": turn["id"], "data": queued}
    try:
        with transaction.atomic():
            if transaction.get_connection().vendor == "postgresql":
                reserved = turn_rows.turn_submit_in_one(
                    conversation_id=conversation_id,
                    request_id=request_id,
                    title=title,
                    now=now,
                    turn=turn,
                    message=message,
                    event=event,
                )
            else:
                reserved = turn_rows.conversation_reserve_turn(
                    conversation_id=conversation_id, request_id=request_id, title=title, now=now
                )
                if reserved is not None:
                    rows_insert(Turn, [{**turn, "ordinal": reserved[0]}])
                    rows_insert(Message, [{**message, "ordinal": 2 * reserved[0]}])
                    rows_insert(Event, [{**event, "sequence": reserved[1]}])
            if reserved is None:
                return _submitted_before(conversation_id=conversation_id, request_id=request_id)
            ordinal, sequence = reserved
            # Only the start: the caller publishes turn.queued.
            transaction.on_commit(lambda: enqueue_turn(turn["id"]))
        frame = event_frame_of(sequence=sequence, kind="turn.queued", turn_id=turn["id"], data=queued)
        return Submitted(Turn(**turn, ordinal=ordinal), True, [frame])
    except IntegrityError:
        # The same request_id raced in from another connection; the first one won.
        return Submitted(Turn.objects.get(conversation_id=conversation_id, request_id=request_id), False, [])


def _submitted_before(*, conversation_id: uuid.UUID, request_id: uuid.UUID) -> Submitted:
    """Why a submit reserved nothing: the conversation is gone, or this request was stored."""
    if not Conversation.objects.filter(id=conversation_id, state=ConversationState.ACTIVE).exists():
        raise NotFound("This conversation does not exist.", code="conversation_not_found")
    return Submitted(Turn.objects.get(conversation_id=conversation_id, request_id=request_id), False, [])


def _finish(turn: Turn, status: str, *, code: str = "", message: str = "") -> list[EventFrame]:
    """Move a locked turn to a terminal status and append its closing event."""
    now = timezone.now()
    rows_update(
        Turn,
        {"id": turn.id},
        {
            "status": status,
            "error_code": code,
            "error_message": message,
            "finished_at": now,
            "lease_token": "",
            "lease_expires_at": None,
        },
    )
    kind = {"completed": "turn.completed", "failed": "turn.failed", "cancelled": "turn.cancelled"}[status]
    data: dict[str, Any] = {"code": code, "message": message} if status == TurnStatus.FAILED else {}
    # Calls still open now were cut off by a crash the turn did not recover from.
    settled = activity_events(turn.id, activities_interrupt(turn_id=turn.id))
    return events_append(conversation_id=turn.conversation_id, events=[*settled, (kind, turn.id, data)])


def activity_events(turn_id: uuid.UUID, activities: list[ActivityJson]) -> list[NewEvent]:
    """Return the `activity.updated` events announcing these activities."""
    return [("activity.updated", turn_id, {"activity": activity}) for activity in activities]


def turn_finish(*, turn_id: uuid.UUID, lease_token: str, status: str, code: str = "", message: str = "") -> bool:
    """End a turn this lease owns; enqueue the conversation's next turn. Return whether it was ours."""
    with transaction.atomic():
        owned = turn_rows.turn_lock_owned(turn_id=turn_id, lease_token=lease_token)
        if owned is None or owned[0] != TurnStatus.RUNNING:
            return False
        conversation_id = owned[1]
        frames = _finish(Turn(id=turn_id, conversation_id=conversation_id), status, code=code, message=message)
        next_turn = turn_next_runnable(conversation_id=conversation_id)
        _after_commit(conversation_id, frames, run=next_turn)
    return True


def turn_next_runnable(*, conversation_id: uuid.UUID) -> uuid.UUID | None:
    """Return the earliest unfinished turn of a conversation, if it is queued."""
    first = turn_rows.turn_first_unfinished(conversation_id=conversation_id)
    return first[0] if first is not None and first[1] == TurnStatus.QUEUED else None


def turn_cancel(*, conversation_id: uuid.UUID) -> uuid.UUID | None:
    """Stop the conversation's active turn (running, or the first queued); return its id."""
    with transaction.atomic():
        turn = (
            Turn.objects.select_for_update()
            .filter(conversation_id=conversation_id, status__in=UNFINISHED)
            .order_by("ordinal")
            .first()
        )
        if turn is None:
            return None
        Turn.objects.filter(id=turn.id).update(cancel_requested=True)
        if turn.status == TurnStatus.QUEUED:
            frames = _finish(turn, TurnStatus.CANCELLED)
            _after_commit(conversation_id, frames, run=turn_next_runnable(conversation_id=conversation_id))
            return turn.id
    # A running turn stops in its worker, which keeps the partial output and ends it.
    publish_cancel(turn.id)
    return turn.id


def turns_stop_for_deletion(*, conversation_id: uuid.UUID) -> None:
    """Ask every unfinished turn of a conversation being deleted to stop now."""
    running = list(
        Turn.objects.filter(conversation_id=conversation_id, status=TurnStatus.RUNNING).values_list("id", flat=True)
    )
    Turn.objects.filter(conversation_id=conversation_id, status__in=UNFINISHED).update(cancel_requested=True)
    for turn_id in running:
        publish_cancel(turn_id)


@dataclass(frozen=True)
class Claim:
    turn_id: uuid.UUID
    conversation_id: uuid.UUID
    ordinal: int
    lease_token: str
    attempt: int
    steps: int
    # turn.started, for the caller to publish once the claim is committed.
    frames: list[EventFrame] = field(default_factory=list)


def turn_claim(*, turn_id: uuid.UUID, provider: str = "", model: str = "") -> Claim | None:
    """Take the lease of a runnable turn; None when it is finished, owned or must wait.

    Called inside a transaction (the engine claims and prepares in one); the frames of
    turn.started come back in the Claim for the caller to publish after commit.
    """
    now = timezone.now()
    with transaction.atomic(savepoint=False):
        # Only the turn's row is locked: a duplicate delivery must not queue behind (or
        # deadlock with) the streaming writes that hold its conversation's row.
        turn = turn_rows.turn_lock_for_claim(turn_id=turn_id)
        if turn is None or turn.status in TERMINAL_TURN_STATUSES:
            return None
        if turn.status == TurnStatus.RUNNING and turn.lease_expires_at and turn.lease_expires_at > now:
            return None  # a live attempt owns it: a duplicate delivery
        if turn.waits:
            return None  # runs when the earlier turn finishes
        recovering = turn.status == TurnStatus.RUNNING
        without_progress = turn.attempts_without_progress + (1 if recovering else 0)
        frames: list[EventFrame] = []
        locked = Turn(id=turn.id, conversation_id=turn.conversation_id)
        if turn.conversation_state != ConversationState.ACTIVE or turn.cancel_requested:
            frames = _finish(locked, TurnStatus.CANCELLED)
        elif without_progress >= MAX_ATTEMPTS_WITHOUT_PROGRESS or turn.attempts >= MAX_ATTEMPTS:
            frames = _finish(
                locked,
                TurnStatus.FAILED,
                code="turn_interrupted",
                message="The answer was interrupted repeatedly and was stopped. Send your message again.",
            )
        if frames:
            _after_commit(turn.conversation_id, frames, run=turn_next_runnable(conversation_id=turn.conversation_id))
            return None
        token = secrets.token_hex(16)
        attempt = turn.attempts + 1
        data = {"attempt": attempt}
        sequence = turn_rows.turn_mark_running(
            turn_id=turn.id,
            lease_token=token,
            lease_expires_at=now + LEASE,
            without_progress=without_progress,
            started_at=turn.started_at or now,
            provider=provider,
            model=model,
            started={"conversation_id": turn.conversation_id, "kind": "turn.started", "turn_id": turn.id, "data": data},
        )
        frames = [event_frame_of(sequence=sequence, kind="turn.started", turn_id=turn.id, data=data)]
        return Claim(turn.id, turn.conversation_id, turn.ordinal, token, attempt, turn.steps, frames)


def turn_cancel_requested(*, turn_id: uuid.UUID) -> bool:
    """Return whether the owner asked this turn to stop (the truth when Redis missed it)."""
    return Turn.objects.filter(id=turn_id, cancel_requested=True).exists()


def turn_lease_renew(*, turn_id: uuid.UUID, lease_token: str) -> bool:
    """Extend a lease this attempt still owns; False means it was lost."""
    return bool(
        Turn.objects.filter(id=turn_id, lease_token=lease_token, status=TurnStatus.RUNNING).update(
            lease_expires_at=timezone.now() + LEASE
        )
    )


def turn_attempt_stalled(*, turn_id: uuid.UUID, lease_token: str, progressed: bool) -> bool:
    """Count an attempt that ended without an answer; return whether another may follow."""
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(id=turn_id, lease_token=lease_token).first()
        if turn is None:
            return False
        count = 0 if progressed else turn.attempts_without_progress + 1
        again = count < MAX_ATTEMPTS_WITHOUT_PROGRESS and turn.attempts < MAX_ATTEMPTS
        Turn.objects.filter(id=turn_id).update(
            attempts_without_progress=count, attempts=F("attempts") + (1 if again else 0)
        )
        return again


def turns_reconcile() -> int:
    """Requeue turns whose worker died (lease expired) or whose enqueue was lost."""
    now = timezone.now()
    expired = list(
        Turn.objects.filter(status=TurnStatus.RUNNING, lease_expires_at__lt=now).values_list("id", flat=True)
    )
    stale_queued = Turn.objects.filter(status=TurnStatus.QUEUED, created_at__lt=now - STALE_QUEUED)
    conversations = set(stale_queued.values_list("conversation_id", flat=True))
    runnable = [turn_next_runnable(conversation_id=c) for c in conversations]
    ids = expired + [turn_id for turn_id in runnable if turn_id is not None]
    for turn_id in ids:
        enqueue_turn(turn_id)
    return len(ids)
