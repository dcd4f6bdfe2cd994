"""Reads of browser tasks: a conversation's tasks (with their records) and proposals, as listed."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from conversations.browser_tasks.lifecycle.record import question_record, steps_record
from conversations.models import (
    BrowserTask,
    BrowserTaskProposal,
    Conversation,
    ConversationState,
    CriticalPoint,
    CriticalPointState,
    ProposalState,
)
from flarebot.core.times import iso


def critical_points_waiting() -> QuerySet[CriticalPoint]:
    """The questions that still wait for the owner: open, in a conversation not being deleted.

    The needs-you list shows them, and a notification about any other is not sent.
    """
    return CriticalPoint.objects.filter(
        state=CriticalPointState.OPEN, task__conversation__state=ConversationState.ACTIVE
    )


def proposals_waiting() -> QuerySet[BrowserTaskProposal]:
    """The browser-task proposals that still wait for the owner: proposed, in a conversation not being deleted."""
    return BrowserTaskProposal.objects.filter(
        state=ProposalState.PROPOSED, conversation__state=ConversationState.ACTIVE
    )


def critical_point_json(point: CriticalPoint) -> dict[str, Any]:
    return {
        "critical_point_id": str(point.id),
        "kind": point.kind,
        "question": point.question,
        "action": point.action,
        "created_at": iso(point.created_at),
    }


def browser_task_json(task: BrowserTask, points: list[CriticalPoint]) -> dict[str, Any]:
    """The contract's task object (`proposal_id`, `summary` and the record, `steps` and `questions`, are additions).

    `points` are the task's critical points, oldest first.
    """
    open_point = next((point for point in points if point.state == CriticalPointState.OPEN), None)
    return {
        "task_id": str(task.id),
        "proposal_id": str(task.proposal_id),
        "status": task.status,
        "goal": task.goal,
        "start_url": task.start_url,
        "restrictions": list(task.restrictions),
        "open_critical_point": critical_point_json(open_point) if open_point is not None else None,
        "summary": task.outcome_summary if task.finished_at is not None else None,
        "steps": steps_record(task.steps),
        "questions": [question_record(point) for point in points],
        "created_at": iso(task.created_at),
        "finished_at": iso(task.finished_at) if task.finished_at else None,
    }


def proposal_json(proposal: BrowserTaskProposal) -> dict[str, Any]:
    """The contract's proposal object (`corrects_task_id` and `carried_restrictions` are additions)."""
    return {
        "proposal_id": str(proposal.id),
        "status": proposal.state,
        "goal": proposal.goal,
        "start_url": proposal.start_url,
        "restrictions": list(proposal.restrictions),
        "corrects_task_id": str(proposal.corrects_id) if proposal.corrects_id else None,
        "carried_restrictions": list(proposal.restrictions[: proposal.carried]),
        "created_at": iso(proposal.created_at),
    }


def browser_tasks_list(*, conversation_id: uuid.UUID) -> dict[str, Any] | None:
    """Return a conversation's tasks, its proposals and the event high-water mark they match; None if unknown."""
    with transaction.atomic():
        # The writers append their events under this lock: the rows and the mark agree.
        conversation = (
            Conversation.objects.select_for_update()
            .filter(id=conversation_id, state=ConversationState.ACTIVE)
            .only("id", "last_sequence")
            .first()
        )
        if conversation is None:
            return None
        tasks = list(BrowserTask.objects.filter(conversation_id=conversation_id).order_by("created_at", "id"))
        points: dict[uuid.UUID, list[CriticalPoint]] = {task.id: [] for task in tasks}
        for point in CriticalPoint.objects.filter(task__in=tasks).order_by("created_at", "id"):
            points[point.task_id].append(point)
        proposals = BrowserTaskProposal.objects.filter(conversation_id=conversation_id).order_by("created_at", "id")
        return {
            "tasks": [browser_task_json(task, points[task.id]) for task in tasks],
            "proposals": [proposal_json(proposal) for proposal in proposals],
            "last_sequence": conversation.last_sequence,
        }
