"""The owner's answer to a critical point: the paused step's result, and exactly what it authorises."""

from __future__ import annotations

from typing import Any

from conversations.browser_tasks.lifecycle.record import step_events
from conversations.events import NewEvent
from conversations.models import BrowserTask, BrowserTaskStatus, CriticalPoint, CriticalPointKind
from tools.browser_tasks.guard import request_signature

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


def task_resume_with(task: BrowserTask, point: CriticalPoint) -> list[NewEvent]:
    """Give a locked paused task the owner's answer (the paused step's result) and make it runnable.

    Returns the events of the record's steps that changed (the paused one is now answered).
    """
    result = _answer_result(point)
    before = task.steps
    task.steps = [
        {**step, "result": result} if step.get("critical_point_id") == str(point.id) else step for step in before
    ]
    task.authorization = _authorization(task, point)
    task.status = BrowserTaskStatus.RUNNING
    task.lease_token = ""
    task.lease_expires_at = None
    task.save()
    return step_events(task.id, before, task.steps)
