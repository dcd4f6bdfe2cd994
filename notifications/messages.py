"""What an event tells the owner: its kind, a title, a bounded one-line summary and the card's path.

Only names the owner gave (a task's, a conversation's) and fixed words go into a message:
never page text, text a browser task typed, a model's summary, or a secret. The path is
the exact card in the chat page (`/?c=<conversation>` and the card's anchor); the link is
`FLAREBOT_ORIGIN` and the path, and opening it needs the owner's session as any page does.

A question and a proposal tell what waits for the owner, and stop being true once the
owner acts: `keys_resolved` says which, from the rows their keys name.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from conversations.browser_tasks.selectors import critical_points_waiting, proposals_waiting
from conversations.events import EventKind
from conversations.models import (
    BrowserTask,
    BrowserTaskProposal,
    Conversation,
)
from flarebot.core.ids import uuid_parse
from notifications.models import Kind
from tasks.models import RunStatus, TaskRun

SUMMARY_MAX = 160
NAME_MAX = 60
# The events that may tell the owner something; every other kind passes untouched.
TELLING = frozenset(
    {
        EventKind.CRITICAL_POINT_OPENED,
        EventKind.BROWSER_TASK_PROPOSED,
        EventKind.BROWSER_TASK_FINISHED,
        EventKind.TASK_RUN_UPDATED,
    }
)
_QUESTION_TITLES = {
    "sign_in": "A browser task needs you to sign in",
    "email_consent": "A browser task asks before sending an email",
    "confirm": "A browser task waits for your approval",
    "question": "A browser task has a question for you",
}
_OUTCOME_WORDS = {"completed": "finished", "failed": "failed", "cancelled": "was stopped", "superseded": "was replaced"}
# What a burst of n of a kind is called in one message.
PLURALS = {
    Kind.NEEDS_ANSWER: "{n} browser tasks need your answer",
    Kind.PROPOSAL: "{n} browser tasks were proposed by unattended runs",
    Kind.RUN_FAILED: "{n} task runs failed or were missed",
    Kind.BROWSER_FINISHED: "{n} browser tasks finished",
    Kind.RUN_COMPLETED: "{n} task runs completed",
}
# The kinds that tell what waits for the owner, and the keys that name what waits.
ANSWERABLE = (Kind.NEEDS_ANSWER, Kind.PROPOSAL)
_QUESTION = "critical_point:"
_PROPOSAL = "proposal:"
_SPACES = re.compile(r"\s+")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


@dataclass(frozen=True)
class Told:
    """A notification to record for an event."""

    kind: Kind
    key: str
    conversation_id: uuid.UUID
    title: str
    summary: str
    path: str
    subject: str = ""  # what it is about, for keeping one subject's messages in order
    task_id: uuid.UUID | None = None  # a run's task, for its "notify me" switch


def one_line(text: str, limit: int = SUMMARY_MAX) -> str:
    """Text on one line, without control or invisible characters, at most `limit` characters."""
    flat = _SPACES.sub(" ", _CONTROLS.sub(" ", text)).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _name(text: str) -> str:
    return "“" + one_line(text, NAME_MAX) + "”"


def _conversation_name(conversation_id: uuid.UUID) -> str:
    name = Conversation.objects.filter(id=conversation_id).values_list("name", flat=True).first()
    return _name(name) if name else "a conversation"


def _card(conversation_id: uuid.UUID, anchor: str = "") -> str:
    return f"/?c={conversation_id}" + (f"#{anchor}" if anchor else "")


def _task_card(conversation_id: uuid.UUID, task_id: object) -> str:
    """The chat page's card of a browser task, where its questions are answered: `#browser-task-<proposal>`."""
    proposal = BrowserTask.objects.filter(id=str(task_id)).values_list("proposal_id", flat=True).first()
    return _card(conversation_id, f"browser-task-{proposal}" if proposal else "")


def told_of(*, conversation_id: uuid.UUID, kind: str, data: dict[str, Any]) -> Told | None:
    """What this stored event tells the owner, if anything (whether it is sent is the settings')."""
    if kind == EventKind.CRITICAL_POINT_OPENED:
        point = data["critical_point_id"]
        return Told(
            kind=Kind.NEEDS_ANSWER,
            key=f"{_QUESTION}{point}",
            conversation_id=conversation_id,
            title=_QUESTION_TITLES.get(str(data.get("kind")), "A browser task needs your answer"),
            summary=one_line(f"Waiting in {_conversation_name(conversation_id)}."),
            path=_task_card(conversation_id, data["task_id"]),
            subject=f"browser_task:{data['task_id']}",
        )
    if kind == EventKind.BROWSER_TASK_FINISHED:
        task = data["task_id"]
        outcome = _OUTCOME_WORDS.get(str(data.get("outcome")), "ended")
        return Told(
            kind=Kind.BROWSER_FINISHED,
            key=f"browser_task:{task}:finished",
            conversation_id=conversation_id,
            title=f"A browser task {outcome}",
            summary=one_line(f"In {_conversation_name(conversation_id)}."),
            path=_task_card(conversation_id, task),
            subject=f"browser_task:{task}",
        )
    if kind == EventKind.BROWSER_TASK_PROPOSED:
        return _proposed(conversation_id, str(data["proposal_id"]))
    if kind == EventKind.TASK_RUN_UPDATED:
        return _run(conversation_id, data["run"])
    return None


def _proposed(conversation_id: uuid.UUID, proposal_id: str) -> Told | None:
    """Only a proposal an unattended run made (its turn is a task run's) is told."""
    turn_id = BrowserTaskProposal.objects.filter(id=proposal_id).values_list("turn_id", flat=True).first()
    run = TaskRun.objects.select_related("task").filter(turn_id=turn_id).first() if turn_id else None
    if run is None:
        return None
    return Told(
        kind=Kind.PROPOSAL,
        key=f"{_PROPOSAL}{proposal_id}",
        conversation_id=conversation_id,
        title="An unattended run proposed a browser task",
        summary=one_line(f"Task {_name(run.task.name)} in {_conversation_name(conversation_id)}: start or dismiss it."),
        path=_card(conversation_id, f"browser-task-{proposal_id}"),
        subject=f"task:{run.task_id}",
    )


def _run(conversation_id: uuid.UUID, run: dict[str, Any]) -> Told | None:
    status = run.get("status")
    if status not in (RunStatus.FAILED, RunStatus.MISSED, RunStatus.COMPLETED):
        return None
    row = TaskRun.objects.select_related("task").filter(id=run["id"]).first()
    if row is None:
        return None
    missed = int(run.get("missed_count") or 1)
    if status == RunStatus.COMPLETED:
        kind, title = Kind.RUN_COMPLETED, "A task run completed"
    elif status == RunStatus.FAILED:
        kind, title = Kind.RUN_FAILED, "A task run failed"
    else:
        kind, title = Kind.RUN_FAILED, "A task run was missed" if missed == 1 else f"{missed} task runs were missed"
    turn_id = run.get("turn_id")
    return Told(
        kind=kind,
        key=f"run:{row.id}:{status}",
        conversation_id=conversation_id,
        title=title,
        summary=one_line(f"Task {_name(row.task.name)} in {_conversation_name(conversation_id)}."),
        path=_card(conversation_id, f"turn-{turn_id}" if turn_id else ""),
        subject=f"task:{row.task_id}",
        task_id=row.task_id,
    )


def _ids(keys: Collection[str], prefix: str) -> dict[uuid.UUID, str]:
    found = {}
    for key in keys:
        parsed = uuid_parse(key.removeprefix(prefix)) if key.startswith(prefix) else None
        if parsed is not None:
            found[parsed] = key
    return found


def keys_resolved(*, keys: Collection[str]) -> set[str]:
    """The keys of questions and proposals among these that no longer wait for the owner.

    A question waits while its critical point is open (an answer, a denial or its task's
    end closes it), a proposal while it is neither started, dismissed nor replaced; neither
    waits once its conversation is being deleted. Other keys tell what happened: never resolved.
    """
    questions, proposals = _ids(keys, _QUESTION), _ids(keys, _PROPOSAL)
    waiting = set()
    if questions:
        waiting |= set(critical_points_waiting().filter(id__in=questions).values_list("id", flat=True))
    if proposals:
        waiting |= set(proposals_waiting().filter(id__in=proposals).values_list("id", flat=True))
    answerable = {key for key in keys if key.startswith((_QUESTION, _PROPOSAL))}
    return answerable - {key for found in (questions, proposals) for id_, key in found.items() if id_ in waiting}
