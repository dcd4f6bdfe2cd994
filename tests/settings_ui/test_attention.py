"""The needs-you list: `GET /api/attention/` and `POST /api/tasks/runs/seen/`, rule by rule."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations import eventlog
from conversations import services as conversation_services
from conversations.events import EventKind
from conversations.models import (
    BrowserTask,
    BrowserTaskProposal,
    BrowserTaskStatus,
    Conversation,
    CriticalPoint,
    CriticalPointState,
    ProposalState,
)
from conversations.turns import turn_submit
from flarebot.asgi import application
from settings_ui.selectors import ATTENTION_MAX
from tasks import services as task_services
from tasks.models import RunStatus, Task, TaskRun
from tools.models import ActivityStatus, ToolActivity

pytestmark = pytest.mark.database

ATTENTION = "/api/attention/"
SEEN = "/api/tasks/runs/seen/"


def items(client) -> list[dict]:
    response = client.get(ATTENTION)
    assert response.status_code == 200, response.content
    assert set(response.json()) == {"items"}
    return response.json()["items"]


def kinds(client) -> list[tuple[str, str]]:
    return [(item["kind"], item["title"]) for item in items(client)]


def read_all(client, conversation: Conversation) -> None:
    """Open the conversation: the page shows its events (one more, as each run and call writes) and marks them read."""
    with transaction.atomic():
        eventlog.events_append(conversation_id=conversation.id, events=[(EventKind.TASK_RUN_UPDATED, None, {})])
    conversation.refresh_from_db()
    response = client.post(
        f"/api/conversations/{conversation.id}/read/",
        json.dumps({"sequence": conversation.last_sequence}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content


@pytest.fixture
def conversation(owner) -> Conversation:
    return conversation_services.conversation_create(name="Shopping")


def proposal_in(conversation: Conversation, *, goal: str = "Buy a kettle", turn_id: uuid.UUID | None = None):
    return BrowserTaskProposal.objects.create(
        conversation=conversation,
        turn_id=turn_id or uuid.uuid4(),
        tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
        goal=goal,
        start_url="https://shop.example/",
    )


def paused_task_asking(conversation: Conversation, *, question: str, kind: str = "question") -> CriticalPoint:
    proposal = proposal_in(conversation)
    BrowserTaskProposal.objects.filter(id=proposal.id).update(state=ProposalState.STARTED)
    task = BrowserTask.objects.create(
        conversation=conversation,
        proposal=proposal,
        goal=proposal.goal,
        start_url=proposal.start_url,
        status=BrowserTaskStatus.PAUSED,
    )
    return CriticalPoint.objects.create(task=task, kind=kind, question=question)


def task_in(conversation: Conversation, name: str = "Morning digest") -> Task:
    data = task_services.task_input_clean(
        name=name,
        instructions="Summarise the news.",
        schedule={"kind": "cron", "expression": "0 9 * * 1", "timezone": "UTC"},
        enabled=True,
    )
    task, _ = task_services.task_create(task_id=uuid.uuid4(), conversation_id=conversation.id, data=data)
    return task


def run_of(task: Task, *, status: str, missed: int = 1, turn_id: uuid.UUID | None = None) -> TaskRun:
    assert task.conversation_id is not None
    return TaskRun.objects.create(
        task=task,
        occurrence=f"m:{task.id}:{uuid.uuid4()}",
        source="manual",
        intended_at=timezone.now(),
        task_version=1,
        status=status,
        request_id=uuid.uuid4(),
        conversation_id=task.conversation_id,
        missed_count=missed,
        turn_id=turn_id,
    )


def unavailable_call(conversation: Conversation, *, kind: str = "web_search", label: str = "Web search"):
    return ToolActivity.objects.create(
        conversation_id=conversation.id,
        turn_id=uuid.uuid4(),
        tool_call_id=f"call-{uuid.uuid4().hex[:8]}",
        kind=kind,
        label=label,
        status=ActivityStatus.UNAVAILABLE,
        summary="Add an OpenAI key in Settings.",
    )


def test_it_is_empty_when_nothing_waits(owner_client, conversation):
    assert items(owner_client) == []


def test_it_lists_an_open_question_with_a_link_to_its_card_until_it_is_answered(owner_client, conversation):
    point = paused_task_asking(conversation, question="Which colour?")

    [item] = items(owner_client)
    assert item == {
        "kind": "critical_point",
        "conversation_id": str(conversation.id),
        "conversation_name": "Shopping",
        "title": "Which colour?",
        "created_at": item["created_at"],
        "path": f"/?c={conversation.id}#browser-task-{point.task.proposal_id}",
    }
    assert item["created_at"].endswith("Z")

    CriticalPoint.objects.filter(id=point.id).update(state=CriticalPointState.RESOLVED, response="Blue")
    assert items(owner_client) == []


def test_it_names_sign_ins_and_email_consents_by_their_kind(owner_client, conversation):
    paused_task_asking(conversation, question="Sign in to the shop.", kind="sign_in")
    paused_task_asking(
        conversation_services.conversation_create(name="Mail"), question="May I email?", kind="email_consent"
    )

    assert sorted(kind for kind, _ in kinds(owner_client)) == ["email_consent", "sign_in"]


def test_opening_the_conversation_does_not_clear_an_open_question(owner_client, conversation):
    paused_task_asking(conversation, question="Which colour?")
    read_all(owner_client, conversation)

    assert kinds(owner_client) == [("critical_point", "Which colour?")]


def test_it_lists_a_proposal_of_an_unattended_run_until_started_or_dismissed(owner_client, conversation):
    task = task_in(conversation)
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Run the digest.")
    run_of(task, status=RunStatus.COMPLETED, turn_id=turn.id)
    unattended = proposal_in(conversation, goal="Renew the library books", turn_id=turn.id)
    proposal_in(conversation, goal="Asked for in the chat")  # the owner's own turn: they saw it

    [item] = items(owner_client)
    assert item["kind"] == "browser_task_proposal"
    assert item["title"] == "A task run proposed a browser task: Renew the library books"
    assert item["path"] == f"/?c={conversation.id}#browser-task-{unattended.id}"

    BrowserTaskProposal.objects.filter(id=unattended.id).update(state=ProposalState.DISMISSED)
    assert items(owner_client) == []


def test_it_lists_failed_and_missed_runs_until_the_tasks_page_sees_them(owner_client, conversation):
    task = task_in(conversation)
    turn_id = uuid.uuid4()
    run_of(task, status=RunStatus.FAILED, turn_id=turn_id)
    run_of(task, status=RunStatus.MISSED, missed=3)
    run_of(task, status=RunStatus.COMPLETED)

    listed = items(owner_client)
    assert [(i["kind"], i["title"]) for i in listed] == [
        ("task_run_missed", "Morning digest: missed 3 times"),
        ("task_run_failed", "Morning digest: the run failed"),
    ]
    assert listed[1]["path"] == f"/?c={conversation.id}#turn-{turn_id}"
    assert listed[0]["path"] == f"/?c={conversation.id}"

    response = owner_client.post(SEEN, content_type="application/json")
    assert response.status_code == 200
    assert response.json() == {"seen": 2}
    assert items(owner_client) == []
    assert owner_client.post(SEEN, content_type="application/json").json() == {"seen": 0}


def test_opening_the_runs_conversation_clears_them_and_a_later_failure_shows_again(owner_client, conversation):
    task = task_in(conversation)
    run_of(task, status=RunStatus.FAILED)
    read_all(owner_client, conversation)

    assert items(owner_client) == []

    later = run_of(task, status=RunStatus.FAILED)
    TaskRun.objects.filter(id=later.id).update(updated_at=timezone.now() + timedelta(seconds=1))
    assert [kind for kind, _ in kinds(owner_client)] == ["task_run_failed"]


def test_seen_takes_no_body(owner_client, conversation):
    run_of(task_in(conversation), status=RunStatus.FAILED)

    response = owner_client.post(SEEN, json.dumps({"all": True}), content_type="application/json")

    assert response.status_code == 400
    assert set(response.json()) == {"error"}
    assert len(items(owner_client)) == 1


def test_it_lists_the_newest_unavailable_call_per_tool_until_the_conversation_is_opened(owner_client, conversation):
    older = unavailable_call(conversation)
    ToolActivity.objects.filter(id=older.id).update(created_at=timezone.now() - timedelta(seconds=1))
    newest = unavailable_call(conversation)
    unavailable_call(conversation, kind="shell", label="Shell")

    listed = items(owner_client)
    assert [(i["kind"], i["title"]) for i in listed] == [
        ("tool_unavailable", "Shell: Add an OpenAI key in Settings."),
        ("tool_unavailable", "Web search: Add an OpenAI key in Settings."),
    ]
    assert listed[1]["path"] == f"/?c={conversation.id}#turn-{newest.turn_id}"

    read_all(owner_client, conversation)
    assert items(owner_client) == []


def test_it_leaves_out_conversations_being_deleted(owner_client, conversation):
    paused_task_asking(conversation, question="Which colour?")
    unavailable_call(conversation)
    Conversation.objects.filter(id=conversation.id).update(state="deleting")

    assert items(owner_client) == []


def test_it_lists_at_most_the_newest_hundred(owner_client, conversation):
    now = timezone.now()
    for n in range(ATTENTION_MAX + 1):
        other = Conversation.objects.create(name=f"C{n}")
        activity = unavailable_call(other)
        ToolActivity.objects.filter(id=activity.id).update(created_at=now + timedelta(seconds=n))

    listed = items(owner_client)

    assert len(listed) == ATTENTION_MAX
    assert listed[0]["conversation_name"] == f"C{ATTENTION_MAX}"
    assert listed[-1]["conversation_name"] == "C1"


def test_it_needs_the_owner(owner, anonymous_client):
    assert anonymous_client.get(ATTENTION).status_code in (401, 403)
    assert anonymous_client.post(SEEN).status_code in (401, 403)


@pytest.mark.django_db(transaction=True)
async def test_the_tasks_page_seeing_runs_tells_every_socket_that_asked(owner_client, conversation):
    await sync_to_async(lambda: run_of(task_in(conversation), status=RunStatus.MISSED))()
    key = owner_client.cookies[settings.SESSION_COOKIE_NAME].value
    headers = [
        (b"origin", settings.FLAREBOT_ORIGIN.encode()),
        (b"cookie", f"{settings.SESSION_COOKIE_NAME}={key}".encode()),
    ]
    socket = WebsocketCommunicator(application, f"/ws/conversations/{conversation.id}/?notices=1", headers=headers)
    assert (await socket.connect(timeout=30))[0]
    try:
        response = await sync_to_async(owner_client.post)(SEEN, content_type="application/json")
        assert response.json() == {"seen": 1}

        assert json.loads(await socket.receive_from(timeout=30)) == {"type": "attention_changed"}
        assert await sync_to_async(items)(owner_client) == []
        # Nothing new to see: no frame.
        await sync_to_async(owner_client.post)(SEEN, content_type="application/json")
        assert await socket.receive_nothing(timeout=0.2)
    finally:
        await socket.disconnect()
