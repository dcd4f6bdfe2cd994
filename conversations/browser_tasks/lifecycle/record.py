"""A task's record as the owner sees it on its card: its steps, and its questions with the owner's answers.

The card keeps the whole record after the task ends, and a reload rebuilds it: the list
endpoint returns it (`steps`, `questions`), and events keep an open card current
(`browser_task.step` for a step that is new or changed, `critical_point.opened` and
`critical_point.resolved` for a question and its answer). A step shows what the runner
noted when the model chose it (`shown`: its description, the element as the page named it,
and the page's address), never its input: typed text and field values never reach the
record. A step that paused names its question; the question carries the answer.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal, TypedDict

from conversations.events import NewEvent, browser_task_step
from conversations.models import CriticalPoint, CriticalPointState
from flarebot.core.times import iso

ACTION_NAME_MAX = 60  # the name of a tool the model made up is shown cut to this

StepOutcome = Literal["running", "done", "failed", "refused", "interrupted", "cancelled", "asked", "answered"]
STEP_OUTCOMES: tuple[StepOutcome, ...] = (
    "running",
    "done",
    "failed",
    "refused",
    "interrupted",
    "cancelled",
    "asked",
    "answered",
)
_ERROR_OUTCOMES: dict[str, StepOutcome] = {
    "refused": "refused",
    "interrupted": "interrupted",
    "cancelled": "cancelled",
}


class ElementRecord(TypedDict):
    number: int
    role: str
    name: str


class StepRecord(TypedDict):
    number: int  # 1-based, the step's place in the task
    action: str  # the tool the model called (go_to, click, ...)
    description: str  # "Clicking 'Add to cart' on shop.example"
    element: ElementRecord | None
    page: str  # the page it acted on; for go_to the address it opened
    outcome: StepOutcome
    critical_point_id: str | None  # the question this step paused at


class AnswerRecord(TypedDict):
    response: str  # the owner's exact words ("" for an email consent)
    approve: bool | None  # a held action: Approve (true), Deny (false), words only (null)
    consent: bool | None  # an email consent


class QuestionRecord(TypedDict):
    critical_point_id: str
    kind: str
    question: str
    action: dict[str, Any] | None
    state: str  # open, resolved (answered) or void (the task ended first)
    answer: AnswerRecord | None
    created_at: str
    resolved_at: str | None


def _outcome(step: dict[str, Any]) -> StepOutcome:
    result = step.get("result")
    if step.get("critical_point_id"):
        return "answered" if result is not None else "asked"
    if result is None:
        return "running"
    if not isinstance(result, dict) or result.get("ok"):
        return "done"
    return _ERROR_OUTCOMES.get(str(result.get("error")), "failed")


def element_record(element: dict[str, Any] | None) -> ElementRecord | None:
    if not element:
        return None
    return {"number": int(element["number"]), "role": str(element["role"]), "name": str(element["name"])}


def step_record(number: int, step: dict[str, Any]) -> StepRecord:
    """One stored step as the card shows it: never its input (typed text)."""
    shown = step.get("shown") or {}
    action = str(step.get("name", ""))[:ACTION_NAME_MAX]
    point = step.get("critical_point_id")
    return {
        "number": number,
        "action": action,
        "description": str(shown.get("description") or action),
        "element": element_record(shown.get("element")),
        "page": str(shown.get("page", "")),
        "outcome": _outcome(step),
        "critical_point_id": str(point) if point else None,
    }


def steps_record(steps: list[dict[str, Any]]) -> list[StepRecord]:
    return [step_record(index + 1, step) for index, step in enumerate(steps)]


def step_events(task_id: uuid.UUID, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[NewEvent]:
    """A `browser_task.step` event for each step that is new in `after` or whose record changed."""
    old = steps_record(before)
    return [
        browser_task_step(task_id=task_id, step=dict(record))
        for index, record in enumerate(steps_record(after))
        if index >= len(old) or old[index] != record
    ]


def answer_record(point: CriticalPoint) -> AnswerRecord | None:
    """The owner's answer as the card shows it (the fields of the reply frames); None while unanswered."""
    if point.state != CriticalPointState.RESOLVED:
        return None
    return {"response": point.response, "approve": point.approved, "consent": point.consent}


def question_record(point: CriticalPoint) -> QuestionRecord:
    return {
        "critical_point_id": str(point.id),
        "kind": point.kind,
        "question": point.question,
        "action": point.action,
        "state": point.state,
        "answer": answer_record(point),
        "created_at": iso(point.created_at) or "",
        "resolved_at": iso(point.resolved_at),
    }
