"""The needs-you list: what waits for the owner, across conversations (`GET /api/attention/`).

It reads every app below (browser tasks and proposals of conversations, task runs, tool
activity), so it lives with the pages above them. The rules, one per kind:

- `critical_point`, `sign_in`, `email_consent`: a browser task's open question; answering
  it (or the task ending) clears it.
- `browser_task_proposal`: a browser task an unattended run (a task run's turn) proposed,
  neither started nor dismissed.
- `task_run_failed`, `task_run_missed`: a run the owner has not seen: not marked seen by
  the Tasks page (`tasks.services.task_runs_seen`), and changed after the conversation's
  read mark last moved (opening the conversation clears it).
- `tool_unavailable`: a tool call refused for want of configuration, after the
  conversation's read mark last moved; the newest per conversation and tool.

Each kind reads at most `ATTENTION_MAX` rows through an index of its own; the list is the
newest `ATTENTION_MAX` of them.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TypedDict

from conversations.browser_tasks.selectors import critical_points_waiting, proposals_waiting
from conversations.models import (
    Conversation,
    ConversationState,
    CriticalPointKind,
)
from flarebot.core.times import iso
from tasks.models import RunStatus, TaskRun
from tasks.services import RUNS_TO_SEE
from tools.models import ActivityStatus, ToolActivity

ATTENTION_MAX = 100
TITLE_MAX = 160

_POINT_KINDS = {
    CriticalPointKind.SIGN_IN: "sign_in",
    CriticalPointKind.EMAIL_CONSENT: "email_consent",
}


class AttentionItem(TypedDict):
    kind: str
    conversation_id: str
    conversation_name: str
    title: str
    created_at: str
    path: str


def _title(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1].rstrip() + "…"


def _path(conversation_id: uuid.UUID, anchor: str = "") -> str:
    """The chat page's link to a conversation, at a card (`#browser-task-<proposal>`) or a turn (`#turn-<id>`)."""
    return f"/?c={conversation_id}" + (f"#{anchor}" if anchor else "")


def _unseen_since(read_at: datetime | None, at: datetime) -> bool:
    """Whether something that happened `at` came after the owner last opened its conversation."""
    return read_at is None or at > read_at


def attention_items(*, limit: int = ATTENTION_MAX) -> list[AttentionItem]:
    """Return what waits for the owner, newest first, at most `limit` entries."""
    found: list[tuple[datetime, AttentionItem]] = []

    def add(kind: str, conversation: Conversation, title: str, at: datetime, path: str) -> None:
        item = AttentionItem(
            kind=kind,
            conversation_id=str(conversation.id),
            conversation_name=conversation.name,
            title=_title(title),
            created_at=iso(at) or "",
            path=path,
        )
        found.append((at, item))

    points = (
        critical_points_waiting()
        .select_related("task__conversation")
        .only("id", "kind", "question", "created_at", "task__proposal_id", "task__conversation__name")
        .order_by("-created_at")[:limit]
    )
    for point in points:
        conversation = point.task.conversation
        anchor = f"browser-task-{point.task.proposal_id}"
        kind = _POINT_KINDS.get(point.kind, "critical_point")  # type: ignore[call-overload]
        add(kind, conversation, point.question, point.created_at, _path(conversation.id, anchor))

    unattended = TaskRun.objects.filter(turn_id__isnull=False).values("turn_id")
    proposals = (
        proposals_waiting()
        .filter(turn_id__in=unattended)
        .select_related("conversation")
        .only("id", "goal", "created_at", "conversation__name")
        .order_by("-created_at")[:limit]
    )
    for proposal in proposals:
        conversation = proposal.conversation
        title = f"A task run proposed a browser task: {proposal.goal}"
        add(
            "browser_task_proposal",
            conversation,
            title,
            proposal.created_at,
            _path(conversation.id, f"browser-task-{proposal.id}"),
        )

    runs = list(
        TaskRun.objects.filter(status__in=RUNS_TO_SEE, seen_at__isnull=True)
        .select_related("task")
        .only("id", "status", "turn_id", "conversation_id", "missed_count", "updated_at", "created_at", "task__name")
        .order_by("-created_at")[:limit]
    )
    activities = list(
        ToolActivity.objects.filter(status=ActivityStatus.UNAVAILABLE)
        .only("id", "conversation_id", "turn_id", "kind", "label", "summary", "created_at")
        .order_by("-created_at")[:limit]
    )
    conversation_ids = {run.conversation_id for run in runs} | {a.conversation_id for a in activities}
    conversations = {
        c.id: c
        for c in Conversation.objects.filter(id__in=conversation_ids, state=ConversationState.ACTIVE).only(
            "id", "name", "read_at"
        )
    }
    for run in runs:
        listed = conversations.get(run.conversation_id)
        if listed is None or not _unseen_since(listed.read_at, run.updated_at):
            continue
        name = run.task.name or "A scheduled task"
        if run.status == RunStatus.MISSED:
            times = "once" if run.missed_count == 1 else f"{run.missed_count} times"
            kind, title = "task_run_missed", f"{name}: missed {times}"
        else:
            kind, title = "task_run_failed", f"{name}: the run failed"
        anchor = f"turn-{run.turn_id}" if run.turn_id else ""
        add(kind, listed, title, run.updated_at, _path(listed.id, anchor))

    shown: set[tuple[uuid.UUID, str]] = set()
    for activity in activities:
        owner_of = conversations.get(activity.conversation_id)
        if owner_of is None or not _unseen_since(owner_of.read_at, activity.created_at):
            continue
        if (owner_of.id, activity.kind) in shown:
            continue  # the newest call of a tool in a conversation stands for the others
        shown.add((owner_of.id, activity.kind))
        title = f"{activity.label}: {activity.summary}" if activity.summary else f"{activity.label} is not set up"
        add(
            "tool_unavailable",
            owner_of,
            title,
            activity.created_at,
            _path(owner_of.id, f"turn-{activity.turn_id}"),
        )

    found.sort(key=lambda entry: entry[0], reverse=True)
    return [item for _, item in found[:limit]]
