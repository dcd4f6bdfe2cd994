"""The durable lifecycle of a browser task: claim, steps, pause, end, projection, reconciliation.

Who runs a task is decided in one place, `browser_task_claim`: a conditional update that
takes a running task of an active conversation that no live attempt holds (`lease_over`,
the one predicate of ownership: its lease time is empty or ran out). Every later write of
the attempt names its lease token, so an attempt that lost its lease changes nothing
(`LeaseLost`). A pause releases the lease: the worker slot is free while the owner thinks,
and the answer makes the task claimable again.

The end of a task is three steps, each committed on its own: the terminal outcome (status,
summary, the `browser_task.finished` event, the checkpoint erased), then its projection
into the conversation as an assistant message (a completed turn of its own, idempotent by
a request id made from the task id, retried by reconciliation, never rerunning browser
work), then the release of its browser context.
"""

from __future__ import annotations

import json
import logging
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from conversations import sql
from conversations.cancel_bus import publish_cancel
from conversations.errors import LeaseLost
from conversations.eventlog import (
    events_append,
    events_append_published,
    events_insert,
    events_publish_after_commit,
    events_publish_sync,
)
from conversations.events import (
    EventKind,
    NewEvent,
    browser_task_finished,
    critical_point_opened,
    message_replaced,
    turn_ended,
)
from conversations.models import (
    UNFINISHED_TASK_STATUSES,
    BrowserTask,
    BrowserTaskStatus,
    Conversation,
    ConversationState,
    CriticalPoint,
    CriticalPointKind,
    CriticalPointState,
    Message,
    MessageRole,
    Turn,
    TurnStatus,
    answer_ordinal,
)
from conversations.titles import DEFAULT_NAME
from flarebot.core.crypto import DecryptionFailed, seal, unseal
from flarebot.core.installation import installation_get_verified
from flarebot.core.waiting import wait_until
from tools.activity import Activity, activity_from_row, activity_progress, activity_store, safe_text
from tools.browser_tasks.guard import request_signature
from tools.models import ActivityStatus, ToolActivity
from tools.web.leases import browser_leases_request_close

logger = logging.getLogger(__name__)

LEASE = timedelta(seconds=15)
LEASE_RENEW_SECONDS = 5.0
MAX_ATTEMPTS = 10
MAX_ACTIONS = 40
MAX_RUNNING = timedelta(minutes=15)  # pauses excluded
STALE_UNCLAIMED = timedelta(seconds=10)  # a running task nobody claimed for this long is enqueued again
RECONCILE_BATCH = 100
CARD_KIND = "browser_task"
CARD_LABEL = "Browser task"
CANCELLED_SUMMARY = "The owner cancelled the browser task."
INTERRUPTED_SUMMARY = "The browser task was interrupted repeatedly and was stopped."
RUN_JOB = "conversations.jobs.browser_task_run"
PROJECTION_NAMESPACE = uuid.UUID("0b5f6c1e-7d1c-4f55-9a1e-4a3f2b6d9c10")
_CARD_STATUS = {
    BrowserTaskStatus.RUNNING: ActivityStatus.RUNNING,
    BrowserTaskStatus.PAUSED: ActivityStatus.RUNNING,
    BrowserTaskStatus.COMPLETED: ActivityStatus.SUCCEEDED,
    BrowserTaskStatus.FAILED: ActivityStatus.FAILED,
    BrowserTaskStatus.CANCELLED: ActivityStatus.CANCELLED,
}
_OUTCOME_TITLE = {
    BrowserTaskStatus.COMPLETED: "Browser task completed.",
    BrowserTaskStatus.FAILED: "Browser task failed.",
    BrowserTaskStatus.CANCELLED: "Browser task cancelled.",
}


def lease_over(now: datetime) -> Q:
    """No attempt holds the task at `now`: it has no lease time (never claimed, paused, ended) or the time ran out.

    The one predicate of a task's ownership: a claim takes a task only where it holds and
    reconciliation enqueues those again; cancel and deletion take a running task where it
    does not hold as one that a worker runs. A released lease (`browser_task_lease_release`)
    keeps its time without a token, so nobody claims the task before then.
    """
    return Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now)


def browser_tasks_held(tasks: QuerySet[BrowserTask]) -> bool:
    """Whether a live lease holds any of these running tasks right now."""
    return tasks.filter(status=BrowserTaskStatus.RUNNING).exclude(lease_over(timezone.now())).exists()


def card_id(task_id: uuid.UUID) -> str:
    """The tool_call_id of a task's activity card; its turn_id is the task's id."""
    return f"browser_task:{task_id}"


def task_card_events(task: BrowserTask, *, progress: str | None = None, summary: str = "") -> list[NewEvent]:
    """Store the task's activity card as the task now stands and return its `activity.updated` event."""
    row = ToolActivity.objects.filter(turn_id=task.id, tool_call_id=card_id(task.id)).first()
    if row is not None:
        activity = activity_from_row(row)
    else:
        activity = Activity(
            conversation_id=task.conversation_id,
            turn_id=task.id,
            tool_call_id=card_id(task.id),
            kind=CARD_KIND,
            label=CARD_LABEL,
            execution_count=1,
            created_at=task.created_at,
            started_at=task.created_at,
        )
    activity.status = _CARD_STATUS[BrowserTaskStatus(task.status)]
    if progress is not None:
        activity_progress(activity, {"message": progress, "done": task.actions, "total": MAX_ACTIONS})
    if task.finished_at is not None:
        activity.finished_at = task.finished_at
        activity.summary = safe_text(summary)
    activity_store(activity)
    return [(EventKind.ACTIVITY_UPDATED, None, {"activity": activity.as_json()})]


# --- checkpoints ------------------------------------------------------------------------


def storage_seal(state: dict[str, Any]) -> bytes:
    """Seal a context's storage state (cookies of signed-in sites) like provider keys."""
    installation = installation_get_verified()
    if installation is None:
        raise DecryptionFailed("no installation")
    return seal(json.dumps(state), server_secret=settings.SECRET_KEY, installation_id=installation.installation_id)


def browser_task_storage_state(*, task_id: uuid.UUID) -> dict[str, Any] | None:
    """Return a task's checkpointed storage state, or None (none stored, or it no longer opens)."""
    sealed = BrowserTask.objects.filter(id=task_id).values_list("storage_sealed", flat=True).first()
    installation = installation_get_verified()
    if sealed is None or installation is None:
        return None
    try:
        opened = unseal(bytes(sealed), server_secret=settings.SECRET_KEY, installation_id=installation.installation_id)
        value = json.loads(opened.reveal())
    except (DecryptionFailed, ValueError):
        logger.warning("browser task %s: its stored browser state no longer opens; restoring without it", task_id)
        return None
    return value if isinstance(value, dict) else None


# --- claim and lease --------------------------------------------------------------------


@dataclass(frozen=True)
class TaskClaim:
    task_id: uuid.UUID
    conversation_id: uuid.UUID
    lease_token: str
    goal: str
    start_url: str
    restrictions: list[str]
    steps: list[dict[str, Any]]
    actions: int
    running_ms: int
    current_url: str
    context_lease_id: uuid.UUID | None
    authorization: dict[str, Any] | None
    cancel_requested: bool


INTERRUPTED_RESULT = {
    "ok": False,
    "error": "interrupted",
    "message": "This action was interrupted by a crash; whether it took effect is unknown. Read the page to check.",
}


def browser_task_claim(*, task_id: uuid.UUID) -> TaskClaim | None:
    """Give a running task no live attempt holds to a new attempt; None when it is not claimable."""
    now = timezone.now()
    token = secrets.token_hex(16)
    with transaction.atomic():
        # Every condition names the task's own row (the conversation only through `IN`), so the
        # update is a plain `UPDATE ... WHERE`: on PostgreSQL a claim that waited for another's
        # row lock checks the lease again on the row that one committed. Filtering through
        # `conversation__state` would make Django nest the lease test in a subquery that keeps
        # its old snapshot, and two claims at once would both win.
        claimed = (
            BrowserTask.objects.filter(
                id=task_id,
                status=BrowserTaskStatus.RUNNING,
                conversation_id__in=Conversation.objects.filter(state=ConversationState.ACTIVE).values("id"),
            )
            .filter(lease_over(now))
            .update(lease_token=token, lease_expires_at=now + LEASE, attempts=F("attempts") + 1)
        )
        if claimed != 1:
            return None
        task = BrowserTask.objects.select_for_update().get(id=task_id)
        if task.attempts > MAX_ATTEMPTS:
            task_end_locked(task, BrowserTaskStatus.FAILED, INTERRUPTED_SUMMARY)
            return None
        # An action that started but never recorded its result was cut off by a crash: it is
        # never done again by itself; the model is told its outcome is unknown.
        steps = [
            {**step, "result": INTERRUPTED_RESULT}
            if step.get("result") is None and not step.get("critical_point_id")
            else step
            for step in task.steps
        ]
        if steps != task.steps:
            BrowserTask.objects.filter(id=task_id).update(steps=steps)
    return TaskClaim(
        task_id=task.id,
        conversation_id=task.conversation_id,
        lease_token=token,
        goal=task.goal,
        start_url=task.start_url,
        restrictions=list(task.restrictions),
        steps=steps,
        actions=task.actions,
        running_ms=task.running_ms,
        current_url=task.current_url,
        context_lease_id=task.context_lease_id,
        authorization=task.authorization,
        cancel_requested=task.cancel_requested,
    )


def _owned(task_id: uuid.UUID, token: str) -> BrowserTask:
    task = (
        BrowserTask.objects.select_for_update()
        .filter(id=task_id, lease_token=token, status=BrowserTaskStatus.RUNNING)
        .first()
    )
    if task is None:
        raise LeaseLost(str(task_id))
    return task


def browser_task_lease_renew(*, task_id: uuid.UUID, lease_token: str) -> bool:
    """Extend a lease this attempt holds; False means it was lost."""
    return (
        BrowserTask.objects.filter(id=task_id, lease_token=lease_token, status=BrowserTaskStatus.RUNNING).update(
            lease_expires_at=timezone.now() + LEASE
        )
        == 1
    )


def browser_task_cancel_requested(*, task_id: uuid.UUID) -> bool:
    return BrowserTask.objects.filter(id=task_id, cancel_requested=True).exists()


def browser_task_lease_release(*, task_id: uuid.UUID, lease_token: str, retry_in: timedelta) -> None:
    """Give up a claim for now: the task becomes claimable again after `retry_in`."""
    BrowserTask.objects.filter(id=task_id, lease_token=lease_token, status=BrowserTaskStatus.RUNNING).update(
        lease_token="", lease_expires_at=timezone.now() + retry_in
    )


def browser_task_context_set(*, task_id: uuid.UUID, lease_token: str, context_lease_id: uuid.UUID) -> None:
    """Record the browser context the attempt now works in."""
    with transaction.atomic():
        _owned(task_id, lease_token)
        BrowserTask.objects.filter(id=task_id).update(context_lease_id=context_lease_id)


@dataclass
class Progress:
    """What an attempt records after each step (its checkpoint, without the browser state)."""

    steps: list[dict[str, Any]]
    actions: int
    running_ms: int
    current_url: str
    authorization: dict[str, Any] | None


def browser_task_step_record(
    *, task_id: uuid.UUID, lease_token: str, progress: Progress, card: str | None = None
) -> None:
    """Store the attempt's steps so far (and the card's current step); LeaseLost if it is no longer ours."""
    with transaction.atomic():
        task = _owned(task_id, lease_token)
        task.steps = progress.steps
        task.actions = progress.actions
        task.running_ms = progress.running_ms
        task.current_url = progress.current_url[:4096]
        task.authorization = progress.authorization
        task.save(update_fields=["steps", "actions", "running_ms", "current_url", "authorization", "updated_at"])
        if card is not None:
            events_append_published(conversation_id=task.conversation_id, events=task_card_events(task, progress=card))


@dataclass(frozen=True)
class Pause:
    kind: str
    question: str
    action: dict[str, Any] | None = None  # what the owner may see of a held action
    action_digest: str = ""


def browser_task_pause(
    *,
    task_id: uuid.UUID,
    lease_token: str,
    progress: Progress,
    pause: Pause,
    point_id: uuid.UUID,
    storage_state: dict[str, Any] | None,
) -> None:
    """Persist the checkpoint and the open question, release the lease, announce `critical_point.opened`."""
    sealed = storage_seal(storage_state) if storage_state is not None else None
    with transaction.atomic():
        task = _owned(task_id, lease_token)
        CriticalPoint.objects.create(
            id=point_id,
            task=task,
            kind=pause.kind,
            question=pause.question,
            action=pause.action,
            action_digest=pause.action_digest,
        )
        task.status = BrowserTaskStatus.PAUSED
        task.lease_token = ""
        task.lease_expires_at = None
        task.steps = progress.steps
        task.actions = progress.actions
        task.running_ms = progress.running_ms
        task.current_url = progress.current_url[:4096]
        task.authorization = None
        if sealed is not None:
            task.storage_sealed = sealed
        task.save()
        opened = critical_point_opened(
            task_id=task.id, critical_point_id=point_id, kind=pause.kind, question=pause.question, action=pause.action
        )
        card = task_card_events(task, progress="Waiting for your answer")
        events_append_published(conversation_id=task.conversation_id, events=[opened, *card])


_REPLY_NOTE = {
    CriticalPointKind.QUESTION: "The owner's reply, verbatim.",
    CriticalPointKind.SIGN_IN: "The owner finished the sign-in in the browser. Read the page again.",
}
APPROVED_NOTE = (
    "Not performed yet. The owner approved exactly this action: repeat it with this critical_point_id in your "
    "very next step; it is then performed once."
)
NOT_APPROVED_NOTE = (
    "Not performed, and not approved: do not perform this action. The owner's words are in owner_reply; follow "
    "them within the restrictions."
)
CONSENT_BOUND_NOTE = (
    "The owner consents: click exactly the control you named, with this critical_point_id, in your very next step."
)
CONSENT_UNBOUND_NOTE = (
    "The owner consents to sending. The control that sends is still held for the owner's approval when you click "
    "it; next time name it in request_email_consent (its element) to ask only once."
)
REFUSED_CONSENT_NOTE = "The owner does not consent: send nothing."


def _authorization(task: BrowserTask, point: CriticalPoint) -> dict[str, Any] | None:
    """What the answer allows: exactly the held action (by its digest), in the context it was given in.

    A confirmation allows it only when the owner explicitly approved (`approved`), never
    by the words of a reply; an email consent only when it was asked for one named action.
    What the held action tried to send (a network hold) is allowed by its requests'
    signatures; an action held by its name may send to the page's own site.
    """
    approved = point.approved if point.kind == CriticalPointKind.CONFIRM else point.consent
    if point.kind not in (CriticalPointKind.CONFIRM, CriticalPointKind.EMAIL_CONSENT) or not approved:
        return None
    if not point.action_digest:
        return None
    held = (point.action or {}).get("requests")
    grant: dict[str, Any] = {
        "critical_point_id": str(point.id),
        "digest": point.action_digest,
        "lease_id": str(task.context_lease_id) if task.context_lease_id else None,
    }
    if held:
        grant["requests"] = [request_signature(request) for request in held]
    else:
        grant["by_name"] = True
    return grant


def _answer_result(point: CriticalPoint) -> dict[str, Any]:
    result: dict[str, Any] = {"critical_point_id": str(point.id)}
    if point.kind == CriticalPointKind.EMAIL_CONSENT:
        result["consent"] = bool(point.consent)
        if not point.consent:
            result["note"] = REFUSED_CONSENT_NOTE
        else:
            result["note"] = CONSENT_BOUND_NOTE if point.action_digest else CONSENT_UNBOUND_NOTE
        return result
    if point.kind == CriticalPointKind.CONFIRM:
        result["performed"] = False
        result["approved"] = bool(point.approved)
        result["owner_reply"] = point.response
        result["note"] = APPROVED_NOTE if point.approved else NOT_APPROVED_NOTE
        return result
    result["owner_reply"] = point.response
    result["note"] = _REPLY_NOTE[CriticalPointKind(point.kind)]
    return result


def task_resume_with(task: BrowserTask, point: CriticalPoint) -> None:
    """Give a locked paused task the owner's answer (the paused step's result) and make it runnable."""
    result = _answer_result(point)
    task.steps = [
        {**step, "result": result} if step.get("critical_point_id") == str(point.id) else step for step in task.steps
    ]
    task.authorization = _authorization(task, point)
    task.status = BrowserTaskStatus.RUNNING
    task.lease_token = ""
    task.lease_expires_at = None
    task.save()


# --- the end ----------------------------------------------------------------------------


def task_end_locked(task: BrowserTask, status: str, summary: str) -> None:
    """Record a locked task's terminal outcome; after commit: publish, project, release the browser."""
    now = timezone.now()
    task.status = status
    task.outcome_summary = summary
    task.finished_at = now
    task.lease_token = ""
    task.lease_expires_at = None
    task.authorization = None
    task.storage_sealed = None  # the checkpoint's browser state is not kept past the end
    task.save()
    CriticalPoint.objects.filter(task_id=task.id, state=CriticalPointState.OPEN).update(
        state=CriticalPointState.VOID, resolved_at=now
    )
    events: list[NewEvent] = [browser_task_finished(task_id=task.id, outcome=status, summary=summary)]
    events += task_card_events(task, progress="Finished", summary=summary)
    frames = events_append(conversation_id=task.conversation_id, events=events)
    task_id, conversation_id, context = task.id, task.conversation_id, task.context_lease_id

    def after() -> None:
        events_publish_sync(conversation_id=conversation_id, frames=frames)
        try:
            browser_task_project(task_id=task_id)
        except Exception:
            logger.exception("browser task %s: its outcome was not projected yet; reconciliation retries", task_id)
        if context is not None:
            browser_leases_request_close(lease_id=context)

    transaction.on_commit(after)


def browser_task_finish(*, task_id: uuid.UUID, lease_token: str, status: str, summary: str) -> bool:
    """End a task this attempt holds; False when it was no longer ours."""
    with transaction.atomic():
        try:
            task = _owned(task_id, lease_token)
        except LeaseLost:
            return False
        task_end_locked(task, status, summary)
    return True


def projection_text(status: str, summary: str) -> str:
    title = _OUTCOME_TITLE[BrowserTaskStatus(status)]
    return f"**{title}** {summary}".strip()


def browser_task_project(*, task_id: uuid.UUID) -> bool:
    """Project an ended task's outcome as an assistant message (once); True when it did now."""
    with transaction.atomic():
        task = (
            BrowserTask.objects.select_for_update()
            .filter(id=task_id, finished_at__isnull=False, projected_at__isnull=True)
            .first()
        )
        if task is None:
            return False
        now = timezone.now()
        turn_id = uuid.uuid4()
        parts = [{"type": "text", "text": projection_text(task.status, task.outcome_summary)}]
        events = [message_replaced(turn_id, parts=parts), turn_ended(turn_id, status=TurnStatus.COMPLETED)]
        # The task was proposed in a turn of this conversation, so this is never its first
        # turn and never titles it (an untitled conversation's name is DEFAULT_NAME anyway).
        reserved = sql.conversation_reserve_turn(
            conversation_id=task.conversation_id,
            request_id=uuid.uuid5(PROJECTION_NAMESPACE, str(task.id)),
            title=DEFAULT_NAME,
            now=now,
            events=len(events),
        )
        if reserved is not None:
            ordinal, first = reserved
            turn = Turn.objects.create(
                id=turn_id,
                conversation_id=task.conversation_id,
                ordinal=ordinal,
                request_id=uuid.uuid5(PROJECTION_NAMESPACE, str(task.id)),
                status=TurnStatus.COMPLETED,
                started_at=now,
                finished_at=now,
            )
            Message.objects.create(
                conversation_id=task.conversation_id,
                turn=turn,
                role=MessageRole.ASSISTANT,
                ordinal=answer_ordinal(ordinal),
                parts=parts,
            )
            events_publish_after_commit(
                conversation_id=task.conversation_id, frames=events_insert([(task.conversation_id, first, events)])
            )
        BrowserTask.objects.filter(id=task_id).update(projected_at=now)
    return True


# --- recovery and deletion --------------------------------------------------------------


def task_run_enqueue(task_id: uuid.UUID, *, countdown: float = 0.0) -> None:
    """Send the durable job that runs (or resumes) a task; never raises (reconciliation retries)."""
    try:
        current_app.send_task(RUN_JOB, args=[str(task_id)], countdown=countdown or None)
    except Exception:
        logger.warning("could not enqueue browser task %s; reconciliation retries it", task_id, exc_info=True)


def browser_tasks_reconcile() -> int:
    """Enqueue running tasks nobody holds (a dead worker, a lost job) and project unprojected outcomes."""
    now = timezone.now()
    # A task never claimed has no lease time: it is taken again once it waited a moment.
    stale = (
        BrowserTask.objects.filter(status=BrowserTaskStatus.RUNNING)
        .filter(lease_over(now))
        .filter(Q(lease_expires_at__isnull=False) | Q(updated_at__lt=now - STALE_UNCLAIMED))
        .values_list("id", flat=True)[:RECONCILE_BATCH]
    )
    ids = list(stale)
    for task_id in ids:
        task_run_enqueue(task_id)
    unprojected = BrowserTask.objects.filter(finished_at__isnull=False, projected_at__isnull=True).values_list(
        "id", flat=True
    )[:RECONCILE_BATCH]
    for task_id in list(unprojected):
        try:
            browser_task_project(task_id=task_id)
        except Exception:
            logger.exception("browser task %s: projection failed again", task_id)
    return len(ids)


def browser_tasks_stop_for_deletion(*, conversation_id: uuid.UUID, timeout: float) -> bool:
    """Cancel a deleted conversation's unfinished tasks and erase every checkpoint; False if one still ran."""
    unfinished = list(
        BrowserTask.objects.filter(conversation_id=conversation_id, status__in=UNFINISHED_TASK_STATUSES).values_list(
            "id", flat=True
        )
    )
    BrowserTask.objects.filter(id__in=unfinished).update(cancel_requested=True)
    for task_id in unfinished:
        publish_cancel(task_id)
    tasks = BrowserTask.objects.filter(conversation_id=conversation_id)
    stopped = wait_until(lambda: not browser_tasks_held(tasks), timeout=timeout)
    for task_id in unfinished:
        with transaction.atomic():
            task = (
                BrowserTask.objects.select_for_update().filter(id=task_id, status__in=UNFINISHED_TASK_STATUSES).first()
            )
            if task is not None:
                task_end_locked(task, BrowserTaskStatus.CANCELLED, CANCELLED_SUMMARY)
    BrowserTask.objects.filter(conversation_id=conversation_id).update(
        storage_sealed=None, steps=[], authorization=None, current_url=""
    )
    CriticalPoint.objects.filter(task__conversation_id=conversation_id).update(response="")
    return stopped
