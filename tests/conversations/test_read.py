"""Unread counts and the read mark: `C.unread`, `POST /api/conversations/{id}/read/`, the `unread` frame."""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor

from conversations import eventlog, services
from conversations.events import EventKind
from conversations.models import Conversation
from flarebot.asgi import application

pytestmark = pytest.mark.database

LIST = "/api/conversations/"


def read(client, conversation_id: object, body: object):
    return client.post(f"{LIST}{conversation_id}/read/", json.dumps(body), content_type="application/json")


def append(conversation: Conversation, *kinds: str) -> None:
    with transaction.atomic():
        eventlog.events_append_published(conversation_id=conversation.id, events=[(kind, None, {}) for kind in kinds])


def listed(client) -> dict[str, int]:
    return {c["name"]: c["unread"] for c in client.get(LIST).json()["conversations"]}


def mark(conversation: Conversation) -> tuple[int, object]:
    conversation.refresh_from_db()
    return conversation.read_sequence, conversation.read_at


@pytest.fixture
def conversation(owner) -> Conversation:
    return services.conversation_create(name="Morning news")


@pytest.fixture
def other(owner) -> Conversation:
    return services.conversation_create(name="Groceries")


def test_it_counts_the_agents_messages_after_the_read_mark(owner_client, conversation, other):
    append(conversation, EventKind.TURN_QUEUED, EventKind.TURN_STARTED, EventKind.TEXT_DELTA, EventKind.TURN_COMPLETED)
    append(conversation, EventKind.CRITICAL_POINT_OPENED, EventKind.BROWSER_TASK_FINISHED, EventKind.TURN_FAILED)
    append(other, EventKind.TURN_CANCELLED, EventKind.TOOL_STARTED)

    assert listed(owner_client) == {"Morning news": 4, "Groceries": 0}


def test_it_marks_read_up_to_a_sequence_and_counts_what_came_after(owner_client, conversation):
    append(conversation, EventKind.TURN_COMPLETED, EventKind.TURN_COMPLETED, EventKind.TURN_COMPLETED)

    response = read(owner_client, conversation.id, {"sequence": 2})

    assert response.status_code == 200, response.content
    assert response.json()["unread"] == 1
    assert response.json()["id"] == str(conversation.id)
    assert listed(owner_client) == {"Morning news": 1}
    assert mark(conversation)[0] == 2


def test_it_never_moves_the_mark_back(owner_client, conversation):
    append(conversation, EventKind.TURN_COMPLETED, EventKind.TURN_COMPLETED)
    read(owner_client, conversation.id, {"sequence": 2})
    before = mark(conversation)

    response = read(owner_client, conversation.id, {"sequence": 1})

    assert response.status_code == 200
    assert response.json()["unread"] == 0
    assert mark(conversation) == before


def test_it_takes_the_last_sequence_and_refuses_one_past_it(owner_client, conversation):
    append(conversation, EventKind.TURN_COMPLETED, EventKind.TURN_COMPLETED)

    refused = read(owner_client, conversation.id, {"sequence": 3})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid_sequence"
    assert mark(conversation) == (0, None)

    taken = read(owner_client, conversation.id, {"sequence": 2})
    assert taken.status_code == 200
    assert taken.json()["unread"] == 0


def test_it_takes_zero_and_changes_nothing_with_it(owner_client, conversation):
    response = read(owner_client, conversation.id, {"sequence": 0})

    assert response.status_code == 200
    assert mark(conversation) == (0, None)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"sequence": -1},
        {"sequence": "2"},
        {"sequence": 1.5},
        {"sequence": True},
        {"sequence": None},
        {"sequence": 1, "extra": 1},
        [1],
    ],
)
def test_it_refuses_a_bad_body_and_changes_nothing(owner_client, conversation, body):
    append(conversation, EventKind.TURN_COMPLETED, EventKind.TURN_COMPLETED)

    response = read(owner_client, conversation.id, body)

    assert response.status_code == 400
    assert set(response.json()) == {"error"}
    assert mark(conversation) == (0, None)


def test_it_answers_404_for_an_unknown_or_deleting_conversation(owner_client, conversation):
    assert read(owner_client, uuid.uuid4(), {"sequence": 0}).status_code == 404
    Conversation.objects.filter(id=conversation.id).update(state="deleting")
    assert read(owner_client, conversation.id, {"sequence": 0}).status_code == 404


def test_it_refuses_a_malformed_id(owner_client):
    response = read(owner_client, "not-a-uuid", {"sequence": 0})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_id"


def test_it_needs_the_owner(anonymous_client, conversation):
    assert read(anonymous_client, conversation.id, {"sequence": 0}).status_code in (401, 403)


def test_search_results_carry_the_unread_count(owner_client, conversation):
    append(conversation, EventKind.TURN_COMPLETED)

    results = owner_client.get(LIST, {"q": "morning"}).json()["results"]

    assert [r["conversation"]["unread"] for r in results] == [1]


@pytest.mark.django_db(transaction=True)
async def test_every_socket_of_the_owner_that_asked_hears_the_new_count(owner_client, conversation, other):
    key = owner_client.cookies[settings.SESSION_COOKIE_NAME].value
    headers = [
        (b"origin", settings.FLAREBOT_ORIGIN.encode()),
        (b"cookie", f"{settings.SESSION_COOKIE_NAME}={key}".encode()),
    ]
    quiet = WebsocketCommunicator(application, f"/ws/conversations/{other.id}/", headers=headers)
    assert (await quiet.connect(timeout=30))[0]
    socket = WebsocketCommunicator(application, f"/ws/conversations/{other.id}/?notices=1", headers=headers)
    accepted, _ = await socket.connect(timeout=30)
    assert accepted
    try:
        await sync_to_async(append)(conversation, EventKind.TURN_STARTED, EventKind.TURN_COMPLETED)
        assert json.loads(await socket.receive_from(timeout=30)) == {
            "type": "unread",
            "conversation_id": str(conversation.id),
            "unread": 1,
        }

        response = await sync_to_async(read)(owner_client, conversation.id, {"sequence": 2})
        assert response.status_code == 200
        frames = [json.loads(await socket.receive_from(timeout=30)) for _ in range(2)]
        assert frames == [
            {"type": "unread", "conversation_id": str(conversation.id), "unread": 0},
            {"type": "attention_changed"},
        ]
        assert await socket.receive_nothing(timeout=0.2)
        # A client that did not ask for them (every client before this addition) gets none.
        assert await quiet.receive_nothing(timeout=0.2)
    finally:
        await socket.disconnect()
        await quiet.disconnect()


@pytest.mark.django_db(transaction=True)
def test_what_was_there_before_unread_counts_existed_counts_as_read(owner_client):
    executor = MigrationExecutor(connection)
    before = [("conversations", "0012_turn_versions")]
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    old = apps.get_model("conversations", "Conversation").objects.create(name="Old answers", last_sequence=2)
    for sequence in (1, 2):
        apps.get_model("conversations", "Event").objects.create(
            conversation_id=old.id, sequence=sequence, kind=EventKind.TURN_COMPLETED
        )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    migrated = Conversation.objects.get(id=old.id)
    append(migrated, EventKind.TURN_COMPLETED)

    assert listed(owner_client) == {"Old answers": 1}
