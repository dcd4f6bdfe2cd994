"""Tool activity as the owner sees it: one card per tool call, built from safe metadata only.

The engine keeps an `Activity` per running call and stores it with the events that
announce each change (`activity.updated`, data `{"activity": A}`), in the same transaction.
What a card may show is chosen here and by each tool's descriptor (`Tool.label`,
`Tool.done_label`, `Tool.summarize`): never raw inputs, results, URLs, commands or errors
of arbitrary formatters; every text is at most 160 characters with control characters made
spaces.
A tool may add a hint for the owner (`ToolContext.hint_owner`, at most 500 characters):
what an operator can do about the outcome, which the model never receives. The one raw
text a card holds is what a running call printed (`progress.output`, the shell's output,
at most OUTPUT_MAX characters): kept while the call runs so a page that loads in the
middle shows all of it, announced in pieces (`activity_announced`), and dropped once the
call ends (the tool part then holds the result).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from django.utils import timezone

from flarebot.core.text import json_text_safe, utf16_length
from flarebot.core.times import iso
from tools.models import ActivityStatus, ToolActivity
from tools.registry import tool_get
from tools.sql import activities_unfinished_exist

logger = logging.getLogger(__name__)

TEXT_MAX = 160
HINT_MAX = 500
# What a running call printed so far, kept whole up to this many characters (the shell's
# 32 KiB of output fits: a byte decodes to at most one character).
OUTPUT_MAX = 32 * 1024
UNKNOWN_TOOL_LABEL = "Unknown tool"
INTERRUPTED_SUMMARY = "Stopped by a crash; whether it took effect is unknown."
FINISHED = {
    ActivityStatus.SUCCEEDED,
    ActivityStatus.FAILED,
    ActivityStatus.CANCELLED,
    ActivityStatus.INTERRUPTED,
    ActivityStatus.UNAVAILABLE,
}


class ProgressJson(TypedDict):
    message: str
    done: int | None
    total: int | None


class OutputJson(TypedDict):
    start: int  # UTF-16 code units of the output before `text`
    text: str


class CardProgressJson(ProgressJson, total=False):
    # What the call printed so far: all of it where the card is read whole (start 0), only
    # what is new in an `activity.updated` event (`activity_announced`); absent when none.
    output: OutputJson


class ActivityJson(TypedDict):
    id: str
    turn_id: str
    tool_call_id: str
    kind: str
    label: str
    status: str
    progress: CardProgressJson | None
    summary: str
    hint: str
    execution_count: int
    created_at: str
    started_at: str | None
    finished_at: str | None
    duration_ms: int | None
    interrupted_at: str | None  # an addition: the latest interruption (a re-run keeps it)


def safe_text(text: object, limit: int = TEXT_MAX) -> str:
    """Return text fit for a card: control characters as spaces, at most `limit` characters."""
    cleaned = "".join(" " if ch < " " or "\x7f" <= ch <= "\x9f" else ch for ch in str(text)).strip()
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**53 else None


@dataclass
class Activity:
    """The activity of one tool call, as the engine holds it while the call runs."""

    conversation_id: uuid.UUID
    turn_id: uuid.UUID
    tool_call_id: str
    kind: str
    label: str
    status: str = ActivityStatus.PENDING
    progress: ProgressJson | None = None
    summary: str = ""
    hint: str = ""  # for the owner's card only (ToolContext.hint_owner)
    execution_count: int = 0
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    created_at: datetime = field(default_factory=timezone.now)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    interrupted_at: datetime | None = None  # the latest interruption, kept through a re-run
    output: str = ""  # what the running call printed so far (stored inside `progress`)
    output_announced: int = 0  # characters of `output` the call's events carried already

    def as_json(self, *, output_from: int = 0) -> ActivityJson:
        """Return the card; of its output, what follows the first `output_from` characters."""
        duration = None
        if self.started_at is not None and self.finished_at is not None:
            duration = int((self.finished_at - self.started_at).total_seconds() * 1000)
        return {
            "id": str(self.id),
            "turn_id": str(self.turn_id),
            "tool_call_id": self.tool_call_id,
            "kind": self.kind,
            "label": self.label,
            "status": self.status,
            "progress": self._progress_json(output_from),
            "summary": self.summary,
            "hint": self.hint,
            "execution_count": self.execution_count,
            "created_at": iso(self.created_at) or "",
            "started_at": iso(self.started_at) if self.started_at else None,
            "finished_at": iso(self.finished_at) if self.finished_at else None,
            "duration_ms": duration,
            "interrupted_at": iso(self.interrupted_at) if self.interrupted_at else None,
        }

    def _progress_json(self, output_from: int) -> CardProgressJson | None:
        if self.progress is None:
            return None
        shown: CardProgressJson = {**self.progress}
        if output_from < len(self.output):
            start = utf16_length(self.output[:output_from])
            shown["output"] = {"start": start, "text": self.output[output_from:]}
        return shown


def activity_announced(activity: Activity) -> ActivityJson:
    """Return the card for its next `activity.updated` event: of the output, only what no event carried yet.

    Events stay small (the output's characters travel once in all), while the stored card
    and `GET .../activities/` hold all of it for a page that loads in the middle.
    """
    card = activity.as_json(output_from=activity.output_announced)
    activity.output_announced = len(activity.output)
    return card


def activity_begin(*, conversation_id: uuid.UUID, turn_id: uuid.UUID, tool_call_id: str, name: str) -> Activity:
    """Return the activity of a call the model just asked for; unknown tools get a generic label."""
    tool = tool_get(name)
    return Activity(
        conversation_id=conversation_id,
        turn_id=turn_id,
        tool_call_id=tool_call_id[:128],
        kind=safe_text(name)[:64] if tool else "unknown",
        label=safe_text(tool.label or tool.name) if tool else UNKNOWN_TOOL_LABEL,
    )


def activity_running(activity: Activity) -> None:
    """Mark a call started on the server: one more execution; the first start time is kept."""
    activity.status = ActivityStatus.RUNNING
    activity.execution_count += 1
    activity.started_at = activity.started_at or timezone.now()
    activity.finished_at = None


def activity_reopen(row: ToolActivity) -> Activity | None:
    """Return an interrupted call's activity, pending again for a real re-run; None if it is not interrupted.

    Only `interrupted` reopens: every other terminal status is final. Creation time, the
    first start time and the execution count are kept.
    """
    if row.status != ActivityStatus.INTERRUPTED:
        return None
    activity = activity_from_row(row)
    activity.status = ActivityStatus.PENDING
    activity.summary = ""
    activity.hint = ""
    activity.progress = None
    activity.output = ""
    activity.output_announced = 0
    activity.finished_at = None
    return activity


def activity_progress(activity: Activity, progress: dict[str, Any]) -> None:
    """Take the safe fields of a progress report: a short message, counts, and the output so far.

    `output` is all the call printed so far (a report without one keeps the last), as text
    for the owner's card only, cut at OUTPUT_MAX characters. Output that no longer starts
    with what events announced is announced again from its start.
    """
    activity.progress = {
        "message": safe_text(progress.get("message", "")),
        "done": _count(progress.get("done")),
        "total": _count(progress.get("total")),
    }
    output = progress.get("output")
    if isinstance(output, str):
        text = json_text_safe(output[:OUTPUT_MAX])
        if not text.startswith(activity.output[: activity.output_announced]):
            activity.output_announced = 0
        activity.output = text


def activity_hint(activity: Activity, hint: str) -> None:
    """Keep what an operator can do about the call's outcome, for the owner's card (never the model)."""
    activity.hint = safe_text(hint, HINT_MAX)


def activity_finish(activity: Activity, *, status: str, output: Any, message: str | None = None) -> None:
    """End the activity with its outcome and the summary its tool's descriptor allows.

    `message` is a safe text written by the engine (or raised as ToolFailed) that says why
    a call did not succeed; a tool's own result is shown only through its `summarize`.
    """
    activity.status = status
    activity.finished_at = timezone.now()
    if status == ActivityStatus.INTERRUPTED:
        activity.interrupted_at = activity.finished_at
    else:
        # The tool part holds the result now; an interrupted call's output is all there is.
        activity.output = ""
        activity.output_announced = 0
    tool = tool_get(activity.kind)
    if tool is not None and tool.done_label and status == ActivityStatus.SUCCEEDED:
        activity.label = safe_text(tool.done_label)
    summary = ""
    if message is not None:
        summary = message
    elif tool is not None and tool.summarize is not None:
        try:
            summary = tool.summarize(output)
        except Exception:
            logger.exception("summary of tool %s raised", tool.name)
    activity.summary = safe_text(summary)


# The columns a card's state is stored in (the row's id and creation time are set once).
STATE_FIELDS = (
    "conversation_id",
    "kind",
    "label",
    "status",
    "progress",
    "summary",
    "hint",
    "execution_count",
    "started_at",
    "finished_at",
    "interrupted_at",
)


def activity_store(activity: Activity) -> None:
    """Write the activity's current state (inside the caller's transaction)."""
    state = {name: getattr(activity, name) for name in STATE_FIELDS}
    state["progress"] = activity.as_json()["progress"]  # with all of its output
    ToolActivity.objects.update_or_create(
        turn_id=activity.turn_id,
        tool_call_id=activity.tool_call_id,
        defaults=state,
        create_defaults={**state, "id": activity.id, "created_at": activity.created_at},
    )


def activity_from_row(row: ToolActivity) -> Activity:
    fields = (*STATE_FIELDS, "turn_id", "tool_call_id", "id", "created_at")
    activity = Activity(**{name: getattr(row, name) for name in fields})
    if isinstance(activity.progress, dict) and "output" in activity.progress:
        progress: dict[str, Any] = {**activity.progress}
        output = progress.pop("output")
        activity.progress = progress  # type: ignore[assignment]
        activity.output = str(output.get("text", "")) if isinstance(output, dict) else ""
    return activity


def activities_reopen(*, conversation_id: uuid.UUID, turn_id: uuid.UUID, calls: dict[str, str]) -> list[Activity]:
    """Return the activities of interrupted calls that recovery runs again (`calls`: id to tool name).

    A call whose activity is missing gets a new one; one that already ended otherwise is
    final and not run again (it is left out).
    """
    rows = {row.tool_call_id: row for row in ToolActivity.objects.filter(turn_id=turn_id, tool_call_id__in=calls)}
    reopened = []
    for call_id, name in calls.items():
        row = rows.get(call_id)
        if row is None:
            reopened.append(
                activity_begin(conversation_id=conversation_id, turn_id=turn_id, tool_call_id=call_id, name=name)
            )
        elif (activity := activity_reopen(row)) is not None:
            reopened.append(activity)
    return reopened


def activities_interrupt(*, turn_id: uuid.UUID) -> list[ActivityJson]:
    """Mark the turn's unfinished activities interrupted (their worker died); return them."""
    if not activities_unfinished_exist(turn_id=turn_id, finished=FINISHED):
        return []  # the common case, checked in plain SQL: every turn's end asks
    rows = list(ToolActivity.objects.select_for_update().filter(turn_id=turn_id).exclude(status__in=FINISHED))
    interrupted = []
    for row in rows:
        activity = activity_from_row(row)
        activity_finish(activity, status=ActivityStatus.INTERRUPTED, output=None, message=INTERRUPTED_SUMMARY)
        activity_store(activity)
        interrupted.append(activity.as_json())
    return interrupted


def activities_delete(*, conversation_id: uuid.UUID) -> None:
    """Delete every activity of a conversation that is being deleted."""
    ToolActivity.objects.filter(conversation_id=conversation_id).delete()
