"""Helpers of the notifications tests: receivers, destinations, and the events that tell the owner."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from conversations import events as conversation_events
from conversations.eventlog import events_append
from conversations.models import BrowserTask, BrowserTaskProposal, BrowserTaskStatus, Conversation, CriticalPoint
from conversations.services import conversation_create
from conversations.turns import turn_submit
from notifications import services
from notifications.models import Destination
from tasks import services as task_services
from tasks.events import task_run_updated
from tasks.models import RunSource, RunStatus, Task, TaskRun
from tasks.selectors import run_view
from tests.support.notify_receivers import HttpReceiver, SmtpReceiver, http_receiver, smtp_receiver

DESTINATIONS = "/api/notifications/destinations/"
SETTINGS = "/api/notifications/settings/"
# A credential that a destination's URL carries: it must never show anywhere but in its seal.
SECRET = "tok3n-s3cr3t-9f8e7d"
# What a browser task typed and what a page said: never in a message.
TYPED = "typed-hunter2-4711"
PAGE = "page-says-SECRET-BALANCE-1234"


@pytest.fixture
def json_receiver() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


@pytest.fixture
def ntfy_receiver() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


@pytest.fixture
def mail_receiver() -> Iterator[SmtpReceiver]:
    with smtp_receiver() as receiver:
        yield receiver


def json_url(receiver: HttpReceiver) -> str:
    return f"json://127.0.0.1:{receiver.port}/hook/{SECRET}"


def ntfy_url(receiver: HttpReceiver) -> str:
    return f"ntfy://owner:{SECRET}@127.0.0.1:{receiver.port}/flarebot"


def mail_url(receiver: SmtpReceiver) -> str:
    return (
        f"mailto://owner:{SECRET}@127.0.0.1:{receiver.port}/"
        "?mode=insecure&from=flarebot@example.com&to=owner@example.com"
    )


def send(client: Client, method: str, path: str, data: object = None) -> Any:
    if data is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, json.dumps(data), content_type="application/json")


def add(url: str, label: str = "Phone") -> Destination:
    return services.destination_create(url=url, label=label)


@pytest.fixture
def conversation(owner: object) -> Conversation:
    return conversation_create(name="Morning reports")


@pytest.fixture
def task(conversation: Conversation) -> Task:
    data = task_services.task_input_clean(
        name="Check the bank",
        instructions=f"Log in and read the balance; type {TYPED}.",
        schedule={"kind": "cron", "expression": "0 9 * * 1", "timezone": "UTC"},
        enabled=True,
    )
    created, _ = task_services.task_create(task_id=uuid.uuid4(), conversation_id=conversation.id, data=data)
    return created


def run_ends(task: Task, *, status: str = RunStatus.FAILED, missed: int = 1) -> TaskRun:
    """A run of the task reaches `status`: its `task_run.updated` is appended as the tasks app appends it."""
    occurrence = f"m:{task.id}:{uuid.uuid4()}"
    assert task.conversation_id is not None
    turn_id = None
    if status != RunStatus.MISSED:
        turn, _ = turn_submit(conversation_id=task.conversation_id, request_id=uuid.uuid4(), text="Run the task.")
        turn_id = turn.id
    with transaction.atomic():
        run = TaskRun.objects.create(
            task=task,
            occurrence=occurrence,
            source=RunSource.SCHEDULED,
            intended_at=timezone.now(),
            task_version=task.version,
            status=status,
            request_id=uuid.uuid4(),
            turn_id=turn_id,
            conversation_id=task.conversation_id,
            missed_count=missed,
        )
        events_append(conversation_id=task.conversation_id, events=[task_run_updated(run_view(run))])
    return run


def browser_task_in(conversation: Conversation, status: str = BrowserTaskStatus.PAUSED) -> BrowserTask:
    """A browser task the owner started from its proposal (the chat page's card is the proposal's)."""
    proposal = BrowserTaskProposal.objects.create(
        conversation=conversation,
        turn_id=uuid.uuid4(),
        tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
        goal="Pay the bill",
        start_url="https://bank.example/pay",
    )
    return BrowserTask.objects.create(
        conversation=conversation,
        proposal=proposal,
        goal=proposal.goal,
        start_url=proposal.start_url,
        status=status,
    )


def question_opens(conversation: Conversation, *, kind: str = "confirm") -> BrowserTask:
    """A paused browser task asks the owner (its question quotes a page and what it typed)."""
    task = browser_task_in(conversation)
    point = CriticalPoint.objects.create(task=task, kind=kind, question="Go on?").id
    event = conversation_events.critical_point_opened(
        task_id=task.id,
        critical_point_id=point,
        kind=kind,
        question=f"The page says {PAGE}; submit the form with {TYPED}?",
        action={"tool": "type", "description": f"type {TYPED}"},
        created_at=None,
    )
    with transaction.atomic():
        events_append(conversation_id=conversation.id, events=[event])
    return task


def browser_task_ends(conversation: Conversation, *, outcome: str = "completed") -> BrowserTask:
    task = browser_task_in(conversation, BrowserTaskStatus.COMPLETED)
    event = conversation_events.browser_task_finished(task_id=task.id, outcome=outcome, summary=f"Found {PAGE}")
    with transaction.atomic():
        events_append(conversation_id=conversation.id, events=[event])
    return task


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
