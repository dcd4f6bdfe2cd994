"""The owner's and the chat model's side of browser tasks: propose, start, dismiss, answer, cancel.

Every write checks its preconditions on locked rows inside one transaction, appends its
events there, and publishes them after commit; anything refused changes nothing. The
rules of the contract live here:

- A proposal starts nothing. Only the owner starts it, once, and only the conversation's
  newest proposal (a newer one supersedes it), while no other task of the conversation is
  unfinished (also a partial unique constraint). The start stores the durable start
  command: the goal, start URL and restrictions exactly as proposed.
- A proposal made while a task of the conversation is unfinished is a correction of it
  (seed 004: corrections go through the ordinary chat route and keep the original
  restrictions): the task's restrictions lead the proposal's, carried over whatever the
  model sent (it may add, never drop). Its Start, while that task is paused, ends it as
  `superseded` and starts the correction in the same transaction, on the paused task's
  page when that is on the start URL's site (`_continuation`); while it runs, Start is
  refused. The row locks order a Start against an answer or a cancel of the paused task:
  whichever comes second sees what the first did, so one task at most stays unfinished.
- An answer names the task's open critical point; a stale or unknown id, a reply of the
  wrong kind, or anything but the exact `continue` for a sign-in is refused and authorises
  nothing. A held action is authorised only by an explicit approval (`approve: true`),
  never by the words of a reply, which go to the task's model as they are. A stored
  answer is acknowledged (`critical_point.resolved`) before the task
  resumes, on whichever worker.
- Cancelling a paused task (or one nobody runs right now) ends it here; a running one is
  told through the cancel bus and ends in its worker.

The task's own lifecycle (claim, steps, pause, finish, projection) is in `lifecycle`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations.browser_tasks import lifecycle
from conversations.browser_tasks.lifecycle.record import answer_record
from conversations.cancel_bus import publish_cancel
from conversations.eventlog import events_append_published
from conversations.events import (
    NewEvent,
    browser_task_dismissed,
    browser_task_proposed,
    browser_task_started,
    critical_point_resolved,
)
from conversations.models import (
    UNFINISHED_TASK_STATUSES,
    BrowserTask,
    BrowserTaskProposal,
    BrowserTaskStatus,
    ConversationState,
    CriticalPoint,
    CriticalPointKind,
    CriticalPointState,
    ProposalState,
)
from conversations.selectors import conversation_require_active
from flarebot.core.errors import Conflict, InvalidInput, NotFound
from flarebot.core.ids import uuid_parse
from flarebot.core.text import has_control_characters, line_breaks_normalize, utf16_length
from flarebot.core.times import iso
from tools.browser_tasks.guard import site_of
from tools.network.policy import Refused, url_check
from tools.web.leases import browser_lease_holder, browser_lease_wake_request

GOAL_MAX = 2_000
START_URL_MAX = 2_048
RESTRICTIONS_MAX = 20
RESTRICTION_MAX = 300
RESPONSE_MAX = 4_000
SIGN_IN_CONTINUE = "continue"
# A reply to a task whose context another worker keeps: that worker is woken at once; this
# job follows after a moment and takes over (closing that context first) if it did not.
WAKE_FALLBACK_SECONDS = 3.0


def _text_problem(text: str, *, limit: int, what: str) -> str | None:
    if not 1 <= utf16_length(text) <= limit:
        return f"{what} must be 1-{limit:,} characters."
    if has_control_characters(text, allow="\n\t"):
        return f"{what} must not contain control characters."
    if not text.strip():
        return f"{what} must not be blank."
    return None


def proposal_problem(*, goal: str, start_url: str, restrictions: list[str]) -> str | None:
    """Return why a proposal's fields break the contract (safe for the model), or None."""
    problem = _text_problem(goal, limit=GOAL_MAX, what="goal")
    if problem is not None:
        return problem
    if len(start_url) > START_URL_MAX:
        return f"start_url must be at most {START_URL_MAX:,} characters."
    try:
        url_check(start_url)
    except Refused as refused:
        return f"start_url is refused by the network policy: {refused.message}"
    if len(restrictions) > RESTRICTIONS_MAX:
        return f"At most {RESTRICTIONS_MAX} restrictions."
    for restriction in restrictions:
        problem = _text_problem(restriction, limit=RESTRICTION_MAX, what="Each restriction")
        if problem is not None:
            return problem
    return None


def browser_task_propose(
    *,
    conversation_id: uuid.UUID,
    turn_id: uuid.UUID,
    tool_call_id: str,
    goal: str,
    start_url: str,
    restrictions: list[str],
) -> BrowserTaskProposal:
    """Store a proposal (superseding the conversation's older ones) and announce it; start nothing.

    A replayed call (same turn and tool call) returns the proposal it stored.
    """
    goal, restrictions = line_breaks_normalize(goal), [line_breaks_normalize(r) for r in restrictions]
    problem = proposal_problem(goal=goal, start_url=start_url, restrictions=restrictions)
    if problem is not None:
        raise InvalidInput(problem, code="invalid_proposal")
    with transaction.atomic():
        conversation_require_active(conversation_id=conversation_id)
        existing = BrowserTaskProposal.objects.filter(turn_id=turn_id, tool_call_id=tool_call_id[:128]).first()
        if existing is not None:
            return existing
        BrowserTaskProposal.objects.filter(conversation_id=conversation_id, state=ProposalState.PROPOSED).update(
            state=ProposalState.SUPERSEDED
        )
        # Read after the update above, which waits for a Start holding an older proposal: a
        # task that Start created is seen here, and this proposal corrects it.
        corrected = BrowserTask.objects.filter(
            conversation_id=conversation_id, status__in=UNFINISHED_TASK_STATUSES
        ).first()
        carried = list(corrected.restrictions) if corrected is not None else []
        restrictions = carried + [restriction for restriction in restrictions if restriction not in carried]
        if len(restrictions) > RESTRICTIONS_MAX:
            raise InvalidInput(
                f"At most {RESTRICTIONS_MAX} restrictions, the {len(carried)} carried over from the unfinished task "
                "included.",
                code="invalid_proposal",
            )
        proposal = BrowserTaskProposal.objects.create(
            conversation_id=conversation_id,
            turn_id=turn_id,
            tool_call_id=tool_call_id[:128],
            goal=goal,
            start_url=start_url,
            restrictions=restrictions,
            corrects=corrected,
            carried=len(carried),
        )
        event = browser_task_proposed(
            proposal_id=proposal.id,
            goal=goal,
            start_url=start_url,
            restrictions=list(restrictions),
            corrects_task_id=corrected.id if corrected is not None else None,
            carried_restrictions=carried,
        )
        events_append_published(conversation_id=conversation_id, events=[event])
    return proposal


_REFUSED_PROPOSAL = {
    ProposalState.DISMISSED: ("proposal_dismissed", "This proposal was dismissed."),
    ProposalState.SUPERSEDED: ("proposal_superseded", "A newer proposal replaced this one."),
    ProposalState.STARTED: ("proposal_started", "This proposal was started already."),
}


def _proposal_locked(*, conversation_id: uuid.UUID, proposal_id: uuid.UUID) -> BrowserTaskProposal:
    proposal = (
        BrowserTaskProposal.objects.select_for_update()
        .filter(id=proposal_id, conversation_id=conversation_id, conversation__state=ConversationState.ACTIVE)
        .first()
    )
    if proposal is None:
        raise NotFound("There is no such proposal in this conversation.", code="proposal_not_found")
    if proposal.state != ProposalState.PROPOSED:
        code, message = _REFUSED_PROPOSAL[ProposalState(proposal.state)]
        raise Conflict(message, code=code)
    return proposal


def _continuation(paused: BrowserTask, start_url: str) -> dict[str, Any]:
    """Where a correction of a paused task starts: that task's page, if it is on the start URL's site.

    Its address, and the cookies and local storage of its checkpoint, restored into a new
    context once the paused one is confirmed closed (the correction names that context, as
    a restore after a restart does). Elsewhere (the correction goes to another site, or the
    paused task had no page yet) it starts on its start URL in a fresh context.
    """
    if not paused.current_url or _site(paused.current_url) != _site(start_url):
        return {}
    return {
        "current_url": paused.current_url,
        "storage_sealed": paused.storage_sealed,
        "context_lease_id": paused.context_lease_id,
    }


def _site(url: str) -> str:
    return site_of(urlsplit(url).hostname or "")


def browser_task_start(*, conversation_id: uuid.UUID, proposal_id: uuid.UUID) -> BrowserTask:
    """Start the task of a proposal the owner confirmed: the durable start command, then the job.

    A correction of the conversation's paused task supersedes that task first.
    """
    try:
        with transaction.atomic():
            proposal = _proposal_locked(conversation_id=conversation_id, proposal_id=proposal_id)
            unfinished = (
                BrowserTask.objects.select_for_update()
                .filter(conversation_id=conversation_id, status__in=UNFINISHED_TASK_STATUSES)
                .first()
            )
            continued: dict[str, Any] = {}
            if unfinished is not None:
                if unfinished.id != proposal.corrects_id:
                    raise Conflict("Another browser task of this conversation is unfinished.", code="task_unfinished")
                if unfinished.status != BrowserTaskStatus.PAUSED:
                    raise Conflict(
                        "The browser task this corrects is running: start the correction once it pauses, or stop it.",
                        code="task_unfinished",
                    )
                continued = _continuation(unfinished, proposal.start_url)
                lifecycle.task_end_locked(unfinished, BrowserTaskStatus.SUPERSEDED, lifecycle.SUPERSEDED_SUMMARY)
            proposal.state = ProposalState.STARTED
            proposal.save(update_fields=["state", "updated_at"])
            task = BrowserTask.objects.create(
                conversation_id=conversation_id,
                proposal=proposal,
                goal=proposal.goal,
                start_url=proposal.start_url,
                restrictions=list(proposal.restrictions),
                **continued,
            )
            events: list[NewEvent] = [browser_task_started(task_id=task.id, proposal_id=proposal.id)]
            events += lifecycle.task_card_events(task, progress="Starting the browser")
            events_append_published(conversation_id=conversation_id, events=events)
            transaction.on_commit(lambda: lifecycle.task_run_enqueue(task.id))
    except IntegrityError:
        # Another start of this conversation won the race for its one unfinished task.
        raise Conflict("Another browser task of this conversation is unfinished.", code="task_unfinished") from None
    return task


def browser_task_dismiss(*, conversation_id: uuid.UUID, proposal_id: uuid.UUID) -> None:
    """Dismiss a proposal the owner does not want; it can no longer be started."""
    with transaction.atomic():
        proposal = _proposal_locked(conversation_id=conversation_id, proposal_id=proposal_id)
        proposal.state = ProposalState.DISMISSED
        proposal.save(update_fields=["state", "updated_at"])
        events_append_published(
            conversation_id=conversation_id, events=[browser_task_dismissed(proposal_id=proposal.id)]
        )


@dataclass(frozen=True)
class Reply:
    """The owner's answer to a critical point: exact text (with, for a confirmation, Approve or Deny), or consent."""

    critical_point_id: str
    response: str | None = None
    consent: bool | None = None
    approve: bool | None = None

    def __post_init__(self) -> None:
        if self.response is not None:
            object.__setattr__(self, "response", line_breaks_normalize(self.response))


def _reply_refusal(point: CriticalPoint, reply: Reply) -> InvalidInput | None:
    if point.kind == CriticalPointKind.EMAIL_CONSENT and reply.consent is None:
        return InvalidInput("This question asks for consent: answer with email_consent_response.", code="wrong_reply")
    if point.kind != CriticalPointKind.EMAIL_CONSENT and reply.consent is not None:
        return InvalidInput("This question is not about consent: answer it in words.", code="wrong_reply")
    if point.kind != CriticalPointKind.CONFIRM and reply.approve is not None:
        return InvalidInput(
            "Only a held action is approved or denied: answer this question in words.", code="wrong_reply"
        )
    if reply.response is None:
        return None
    if point.kind == CriticalPointKind.SIGN_IN and reply.response != SIGN_IN_CONTINUE:
        return InvalidInput(
            'A sign-in is ended only with "Continue after sign-in"; nothing else is sent.', code="sign_in_continue_only"
        )
    problem = _text_problem(reply.response, limit=RESPONSE_MAX, what="The answer")
    return InvalidInput(problem, code="invalid_response") if problem is not None else None


def critical_point_answer(*, conversation_id: uuid.UUID, reply: Reply) -> uuid.UUID:
    """Store the owner's answer to a task's open critical point and resume the task; return the task id."""
    point_id = uuid_parse(reply.critical_point_id)
    if point_id is None:
        raise NotFound("No browser task is waiting for an answer to this question.", code="unknown_critical_point")
    with transaction.atomic():
        found = (
            CriticalPoint.objects.filter(
                id=point_id, task__conversation_id=conversation_id, task__conversation__state=ConversationState.ACTIVE
            )
            .values_list("task_id", flat=True)
            .first()
        )
        if found is None:
            raise NotFound("No browser task is waiting for an answer to this question.", code="unknown_critical_point")
        task = BrowserTask.objects.select_for_update().get(id=found)
        point = CriticalPoint.objects.select_for_update().get(id=point_id)
        if point.state != CriticalPointState.OPEN or task.status != BrowserTaskStatus.PAUSED:
            raise Conflict("This question is no longer open; answer the current one.", code="stale_critical_point")
        refusal = _reply_refusal(point, reply)
        if refusal is not None:
            raise refusal
        point.state = CriticalPointState.RESOLVED
        point.response = reply.response or ""
        point.consent = reply.consent
        point.approved = reply.approve
        resolved_at = timezone.now()
        point.resolved_at = resolved_at
        point.save(update_fields=["state", "response", "consent", "approved", "resolved_at", "updated_at"])
        steps = lifecycle.task_resume_with(task, point)
        resolved = critical_point_resolved(
            task_id=task.id,
            critical_point_id=point.id,
            answer=dict(answer_record(point) or {}),
            resolved_at=iso(resolved_at),
        )
        events: list[NewEvent] = [resolved, *steps]
        events += lifecycle.task_card_events(task, progress="Resuming after your answer")
        events_append_published(conversation_id=conversation_id, events=events)
        context_lease_id = task.context_lease_id
        transaction.on_commit(lambda: _resume(task.id, context_lease_id))
    return task.id


def _resume(task_id: uuid.UUID, context_lease_id: uuid.UUID | None) -> None:
    """Wake the worker that keeps the task's context, with the durable job as a fallback."""
    held = browser_lease_holder(lease_id=context_lease_id) if context_lease_id is not None else None
    if held is not None and held[0] == "open" and browser_lease_wake_request(lease_id=context_lease_id):  # type: ignore[arg-type]
        lifecycle.task_run_enqueue(task_id, countdown=WAKE_FALLBACK_SECONDS)
    else:
        lifecycle.task_run_enqueue(task_id)


def browser_task_cancel(*, conversation_id: uuid.UUID) -> uuid.UUID | None:
    """Cancel the conversation's unfinished browser task, running or paused; return its id (None: none)."""
    with transaction.atomic():
        task = (
            BrowserTask.objects.select_for_update()
            .filter(conversation_id=conversation_id, status__in=UNFINISHED_TASK_STATUSES)
            .first()
        )
        if task is None:
            return None
        BrowserTask.objects.filter(id=task.id).update(cancel_requested=True)
        held = lifecycle.browser_tasks_held(BrowserTask.objects.filter(id=task.id))
        if task.status == BrowserTaskStatus.PAUSED or not held:
            lifecycle.task_end_locked(task, BrowserTaskStatus.CANCELLED, lifecycle.CANCELLED_SUMMARY)
            return task.id
    publish_cancel(task.id)  # its worker stops it between two actions
    return task.id


def browser_input_check(*, conversation_id: uuid.UUID, task_id: uuid.UUID, critical_point_id: str) -> None:
    """Refuse the owner's live-view input unless it names the task's open sign-in point."""
    point_id = uuid_parse(critical_point_id)
    open_sign_in = point_id is not None and (
        CriticalPoint.objects.filter(
            id=point_id,
            task_id=task_id,
            task__conversation_id=conversation_id,
            task__status=BrowserTaskStatus.PAUSED,
            kind=CriticalPointKind.SIGN_IN,
            state=CriticalPointState.OPEN,
        ).exists()
    )
    if not open_sign_in:
        raise Conflict("No sign-in of this task is open; the input was not sent.", code="stale_critical_point")
