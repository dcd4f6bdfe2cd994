"""Turn services: submit, cancel, claim, finish and reconcile.

Who may run a turn is decided in one place: `turn_claim`, a conditional update that
takes a turn no live attempt holds (queued, or its lease ran out) whose earlier turns are
all finished, and counts the attempt. The doorbell, the Celery task, recovery after a
crash and the retry of a stalled attempt all go through it; the conditions themselves are
SQL in `conversations.sql`. A duplicate delivery that finds a live lease leaves at once.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.db import IntegrityError, transaction
from django.utils import timezone

from attachments.services import attachment_part, attachments_claim, attachments_for_message
from conversations import sql
from conversations.cancel_bus import publish_cancel
from conversations.doorbell import doorbell_ring, durable_send_later
from conversations.eventlog import (
    EventFrame,
    event_frame_of,
    events_append,
    events_publish_after_commit,
    events_publish_sync,
)
from conversations.events import EventKind, activity_events, turn_ended, turn_queued_data, turn_started_data
from conversations.models import (
    Message,
    MessageRole,
    Turn,
    TurnStatus,
)
from conversations.search import search_index_turn
from conversations.selectors import conversation_require_active
from conversations.serializers import message_json
from conversations.signals import turn_ended as turn_ended_signal
from conversations.titles import conversation_title_from_text
from conversations.titling import conversation_title_wanted
from conversations.versions import turn_submit_version
from flarebot.core.errors import InvalidInput
from flarebot.core.text import line_breaks_normalize, utf16_length
from flarebot.core.waiting import wait_until
from tools.activity import activities_interrupt

MAX_TEXT_UTF16 = 32_000
logger = logging.getLogger(__name__)

# A worker that dies loses its turns for at most this long (plus a reconciliation period):
# the heartbeat renews the lease three times within it.
LEASE = timedelta(seconds=15)
LEASE_RENEW_SECONDS = 5.0
LIMITS = sql.AttemptLimits(
    without_progress=3,
    attempts=10,  # a turn that keeps crashing after some progress each time still ends
)
STALE_QUEUED = timedelta(seconds=20)
RECONCILE_BATCH = 500
UNFINISHED = (TurnStatus.QUEUED, TurnStatus.RUNNING)
INTERRUPTED_TOO_OFTEN = "The answer was interrupted repeatedly and was stopped. Send your message again."


def user_text_clean(text: str, *, attachments: bool = False) -> str:
    """Check a user message (its line breaks made `\n`): 1-32,000 characters (UTF-16 code units), no NUL.

    A message with attachments may have no text at all (`""`); blank text is refused still.
    """
    text = line_breaks_normalize(text)
    if attachments and text == "":
        return text
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

    # Robust: in a batch of ends, one announcement that fails must not cost the others theirs.
    transaction.on_commit(announce, robust=True)


@dataclass(frozen=True)
class Submitted:
    turn: Turn
    created: bool
    frames: list[EventFrame]  # turn.queued, committed, for the caller to publish


def turn_submit(
    *,
    conversation_id: uuid.UUID,
    request_id: uuid.UUID,
    text: str,
    source: dict[str, Any] | None = None,
    attachments: list[Any] | None = None,
) -> tuple[Turn, bool]:
    """Store the user's message and a queued turn; a repeated request_id returns the same turn.

    `source` marks a message that an upper app sent on the owner's behalf (a scheduled
    task); it is stored in the message's text part as it is, for the transcript and pages.
    `attachments` are ids of files uploaded to the conversation and not sent yet.
    """
    submitted = turn_submit_unpublished(
        conversation_id=conversation_id, request_id=request_id, text=text, source=source, attachments=attachments
    )
    events_publish_after_commit(conversation_id=conversation_id, frames=submitted.frames)
    return submitted.turn, submitted.created


def turn_submit_unpublished(
    *,
    conversation_id: uuid.UUID,
    request_id: uuid.UUID,
    text: str,
    source: dict[str, Any] | None = None,
    attachments: list[Any] | None = None,
) -> Submitted:
    """Submit a turn and leave publishing turn.queued to the caller (a socket, on its own loop).

    The conversation moves to the top of the list; its first turn titles it, unless the
    owner named it (both in the statement that reserves the turn). A message with
    attachments claims them in the same transaction (`attachments_claim`): a bad id, or one
    another message took meanwhile, stores nothing.
    """
    text = user_text_clean(text, attachments=bool(attachments))
    if attachments:
        if Turn.objects.filter(conversation_id=conversation_id, request_id=request_id).exists():
            return _submitted_before(conversation_id=conversation_id, request_id=request_id)
        conversation_require_active(conversation_id=conversation_id)
        files = attachments_for_message(conversation_id=conversation_id, ids=attachments)
    else:
        files = []
    now = timezone.now()
    title = conversation_title_from_text(text or files[0].name)
    turn = {"id": uuid.uuid4(), "conversation_id": conversation_id, "request_id": request_id}
    message_id = uuid.uuid4()
    message = {
        "id": message_id,
        "conversation_id": conversation_id,
        "turn_id": turn["id"],
        "role": MessageRole.USER.value,
        "parts": [
            {"type": "text", "text": text} if source is None else {"type": "text", "text": text, "source": source},
            *(attachment_part(a) for a in files),
        ],
        "created_at": now,
        "updated_at": now,
    }
    queued = turn_queued_data(request_id=request_id, message=message_json(Message(**message)))
    event = {"conversation_id": conversation_id, "kind": EventKind.TURN_QUEUED, "turn_id": turn["id"], "data": queued}
    try:
        with transaction.atomic() if files else nullcontext():
            reserved = sql.turn_submit(
                conversation_id=conversation_id,
                request_id=request_id,
                title=title,
                now=now,
                turn=turn,
                message=message,
                event=event,
            )
            if reserved is not None and files:
                attachments_claim(conversation_id=conversation_id, attachments=files, message_id=message_id)
        if reserved is None:
            return _submitted_before(conversation_id=conversation_id, request_id=request_id)
        ordinal, sequence = reserved
        # Only the start: the caller publishes turn.queued. Outside a transaction this
        # runs at once, the rows being committed.
        transaction.on_commit(lambda: enqueue_turn(turn["id"]))
        frame = event_frame_of(sequence=sequence, kind=EventKind.TURN_QUEUED, turn_id=turn["id"], data=queued)
        return Submitted(Turn(**turn, ordinal=ordinal), True, [frame])
    except IntegrityError:
        # The same request_id raced in from another connection; the first one won.
        return Submitted(Turn.objects.get(conversation_id=conversation_id, request_id=request_id), False, [])


def turn_submit_version_unpublished(
    *, conversation_id: uuid.UUID, request_id: uuid.UUID, text: str, version_of: uuid.UUID
) -> Submitted:
    """Submit a message as a new version of a shown turn's (conversations.versions); the caller publishes."""
    text = user_text_clean(text)
    with transaction.atomic():
        submitted = turn_submit_version(
            conversation_id=conversation_id, request_id=request_id, text=text, version_of=version_of
        )
        if submitted.created:
            transaction.on_commit(lambda: enqueue_turn(submitted.turn.id))
    return Submitted(submitted.turn, submitted.created, submitted.frames)


def turn_submit_version_published(
    *, conversation_id: uuid.UUID, request_id: uuid.UUID, text: str, version_of: uuid.UUID
) -> Turn:
    """`turn_submit_version_unpublished`, its events published after commit."""
    submitted = turn_submit_version_unpublished(
        conversation_id=conversation_id, request_id=request_id, text=text, version_of=version_of
    )
    events_publish_after_commit(conversation_id=conversation_id, frames=submitted.frames)
    return submitted.turn


def _submitted_before(*, conversation_id: uuid.UUID, request_id: uuid.UUID) -> Submitted:
    """Why a submit reserved nothing: the conversation is gone, or this request was stored."""
    conversation_require_active(conversation_id=conversation_id)
    return Submitted(Turn.objects.get(conversation_id=conversation_id, request_id=request_id), False, [])


def _finish(turn: Turn, status: str, *, code: str = "", message: str = "") -> list[EventFrame]:
    """Move a locked turn to a terminal status and append its closing event."""
    sql.turn_end_set(turn_id=turn.id, status=status, code=code, message=message, now=timezone.now())
    search_index_turn(turn_id=turn.id, conversation_id=turn.conversation_id)
    # Calls still open now were cut off by a crash the turn did not recover from.
    settled = activity_events(turn.id, activities_interrupt(turn_id=turn.id))
    ended = turn_ended(turn.id, status=status, code=code, message=message)
    frames = events_append(conversation_id=turn.conversation_id, events=[*settled, ended])
    turn_ended_signal.send(sender=Turn, turn_id=turn.id, conversation_id=turn.conversation_id, status=status)
    return frames


@dataclass(frozen=True)
class Finish:
    """How an attempt ends its turn (`turn_finish`'s arguments)."""

    turn_id: uuid.UUID
    lease_token: str
    status: str
    code: str = ""
    message: str = ""


def turn_finish(*, turn_id: uuid.UUID, lease_token: str, status: str, code: str = "", message: str = "") -> bool:
    """End a turn this lease owns; enqueue the conversation's next turn. Return whether it was ours."""
    with transaction.atomic():
        return _finish_owned(Finish(turn_id, lease_token, status, code, message))


def turns_finish(finishes: Sequence[Finish]) -> list[bool | Exception]:
    """`turn_finish` for turns that ended together, in one transaction: each one's outcome, in order.

    A burst's ends then cost one commit in all. Optimistic, like the batched starts: when
    any end fails, the transaction is rolled back and each turn is ended alone, so that a
    failure is its own turn's (its exception is its outcome). A turn listed twice is ended
    by the first that owns it; the other gets False, as a second `turn_finish` would.
    """
    if len(finishes) == 1:
        return [_finish_alone(finishes[0])]
    outcomes: list[bool | Exception] = [False] * len(finishes)
    try:
        with transaction.atomic():
            # Rows are locked in one order in every batch, so two batches never wait on each
            # other (a stable sort: a turn listed twice is tried in the order given).
            for i in sorted(range(len(finishes)), key=lambda i: finishes[i].turn_id):
                outcomes[i] = _finish_owned(finishes[i])
    except Exception:
        logger.warning("a batch of %d turn ends failed; ending each alone", len(finishes), exc_info=True)
        return [_finish_alone(finish) for finish in finishes]
    return outcomes


def _finish_alone(finish: Finish) -> bool | Exception:
    try:
        with transaction.atomic():
            return _finish_owned(finish)
    except Exception as error:
        return error


def _finish_owned(finish: Finish) -> bool:
    """Inside the caller's transaction: end the turn if this lease owns it, announcing it after the commit."""
    owned = sql.turn_lock_owned(turn_id=finish.turn_id, lease_token=finish.lease_token)
    if owned is None or owned[0] != TurnStatus.RUNNING:
        return False
    conversation_id = owned[1]
    turn = Turn(id=finish.turn_id, conversation_id=conversation_id)
    frames = _finish(turn, finish.status, code=finish.code, message=finish.message)
    _after_commit(conversation_id, frames, run=turn_next_runnable(conversation_id=conversation_id))
    if finish.status == TurnStatus.COMPLETED and conversation_title_wanted(conversation_id=conversation_id):
        # Its first answer (or the first after an edit of its first message): the model names
        # the conversation, on a worker (conversations.titling).
        transaction.on_commit(lambda: _title_enqueue(conversation_id), robust=True)
    return True


def _title_enqueue(conversation_id: uuid.UUID) -> None:
    try:
        current_app.send_task("conversations.jobs.conversation_title", args=[str(conversation_id)])
    except Exception:
        # The conversation keeps the name its first message gave; its next answer asks again.
        logger.warning("could not enqueue the title of conversation %s", conversation_id, exc_info=True)


def turn_next_runnable(*, conversation_id: uuid.UUID) -> uuid.UUID | None:
    """Return the earliest unfinished turn of a conversation, if it is queued."""
    first = sql.turn_first_unfinished(conversation_id=conversation_id)
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


def turn_cancel_one(*, turn_id: uuid.UUID) -> bool:
    """Stop one unfinished turn, leaving the conversation's other turns alone; False if it had ended.

    A queued turn ends now; a running one stops in its worker, keeping its partial output.
    """
    with transaction.atomic():
        turn = Turn.objects.select_for_update().filter(id=turn_id, status__in=UNFINISHED).first()
        if turn is None:
            return False
        Turn.objects.filter(id=turn.id).update(cancel_requested=True)
        if turn.status == TurnStatus.QUEUED:
            frames = _finish(turn, TurnStatus.CANCELLED)
            run = turn_next_runnable(conversation_id=turn.conversation_id)
            _after_commit(turn.conversation_id, frames, run=run)
            return True
    publish_cancel(turn.id)
    return True


def turns_stop_for_deletion(*, conversation_id: uuid.UUID) -> None:
    """Ask every unfinished turn of a conversation being deleted to stop now."""
    running = list(
        Turn.objects.filter(conversation_id=conversation_id, status=TurnStatus.RUNNING).values_list("id", flat=True)
    )
    Turn.objects.filter(conversation_id=conversation_id, status__in=UNFINISHED).update(cancel_requested=True)
    for turn_id in running:
        publish_cancel(turn_id)


def turns_wait_stopped(*, conversation_id: uuid.UUID, timeout: float) -> bool:
    """Wait until no live attempt runs a turn of the conversation; False if one still did at `timeout`."""
    return wait_until(lambda: not sql.turns_held(conversation_id=conversation_id, now=timezone.now()), timeout=timeout)


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


def turn_claim(
    *, turn_id: uuid.UUID, provider: str = "", model: str = "", lease_token: str | None = None
) -> Claim | None:
    """Give a claimable turn to a new attempt under a fresh lease (or `lease_token`'s).

    The one claim of the doorbell, the Celery task and recovery: a conditional update
    (`sql.turn_claim_running`) that succeeds only for a turn no live attempt holds,
    with no earlier unfinished turn, that may start again. A claimable turn that may not
    (cancelled, its conversation deleted, its attempts used up) is finished here instead.
    Called inside a transaction (the engine claims and prepares in one); the frames of
    turn.started come back in the Claim for the caller to publish after commit.
    """
    now = timezone.now()
    token = lease_token or secrets.token_hex(16)
    with transaction.atomic(savepoint=False):
        claimed = sql.turn_claim_running(
            turn_id=turn_id,
            lease_token=token,
            now=now,
            lease_expires_at=now + LEASE,
            provider=provider,
            model=model,
            limits=LIMITS,
        )
        if claimed is None:
            _settle_unclaimed(turn_id=turn_id, now=now)
            return None
        data = turn_started_data(attempt=claimed.attempt)
        frames = [event_frame_of(sequence=claimed.sequence, kind=EventKind.TURN_STARTED, turn_id=turn_id, data=data)]
        return Claim(turn_id, claimed.conversation_id, claimed.ordinal, token, claimed.attempt, claimed.steps, frames)


def _settle_unclaimed(*, turn_id: uuid.UUID, now: datetime) -> None:
    """Finish a claimable turn that may not start again: cancelled, or failed after too many attempts."""
    unclaimed = sql.turn_lock_unclaimed(turn_id=turn_id, now=now, limits=LIMITS)
    if unclaimed is None:
        return  # owned by a live attempt, waiting for an earlier turn, or finished
    locked = Turn(id=turn_id, conversation_id=unclaimed.conversation_id)
    if unclaimed.stopped:
        frames = _finish(locked, TurnStatus.CANCELLED)
    elif unclaimed.over_budget:
        frames = _finish(locked, TurnStatus.FAILED, code="turn_interrupted", message=INTERRUPTED_TOO_OFTEN)
    else:
        return  # it became claimable a moment ago: the next delivery takes it
    _after_commit(unclaimed.conversation_id, frames, run=turn_next_runnable(conversation_id=unclaimed.conversation_id))


def turn_attempt_restart(*, claim: Claim, provider: str, model: str) -> Claim | None:
    """Start the next attempt of a turn this lease holds (its last attempt stalled), through the claim.

    None, with nothing changed, when the turn may not start again (its attempts are used up,
    it was cancelled) or the lease was lost: the caller ends the turn.
    """
    with transaction.atomic():
        if not sql.turn_lease_set(turn_id=claim.turn_id, lease_token=claim.lease_token, expires_at=None):
            return None
        again = sql.turn_claim_running(
            turn_id=claim.turn_id,
            lease_token=claim.lease_token,
            now=timezone.now(),
            lease_expires_at=timezone.now() + LEASE,
            provider=provider,
            model=model,
            limits=LIMITS,
        )
        if again is None:
            transaction.set_rollback(True)  # the lease stays as it was
            return None
    data = turn_started_data(attempt=again.attempt)
    frames = [event_frame_of(sequence=again.sequence, kind=EventKind.TURN_STARTED, turn_id=claim.turn_id, data=data)]
    return replace(claim, attempt=again.attempt, steps=again.steps, frames=frames)


def turn_cancel_requested(*, turn_id: uuid.UUID) -> bool:
    """Return whether the owner asked this turn to stop (the truth when Redis missed it)."""
    return Turn.objects.filter(id=turn_id, cancel_requested=True).exists()


def turn_lease_renew(*, turn_id: uuid.UUID, lease_token: str) -> bool:
    """Extend a lease this attempt still holds; False means it was lost."""
    return sql.turn_lease_set(turn_id=turn_id, lease_token=lease_token, expires_at=timezone.now() + LEASE)


def turn_progress_record(*, claim: Claim) -> None:
    """The attempt produced output: its attempts without progress start over."""
    sql.turn_progress_record(turn_id=claim.turn_id, lease_token=claim.lease_token)


def turn_step_record(*, claim: Claim, steps: int) -> None:
    """Store how many model steps of the answer are complete (a retried attempt resumes after them)."""
    sql.turn_steps_set(turn_id=claim.turn_id, lease_token=claim.lease_token, steps=steps)


def turns_reconcile() -> int:
    """Requeue every turn a worker could claim but nobody is about to: its worker died, or its enqueue was lost."""
    now = timezone.now()
    ids = sql.turns_claimable(now=now, queued_before=now - STALE_QUEUED, limit=RECONCILE_BATCH)
    for turn_id in ids:
        enqueue_turn(turn_id)
    return len(ids)
