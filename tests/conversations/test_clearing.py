"""Clearing a conversation's history: everything shown goes, the conversation and its name stay.

Real turns through the engine with a scripted model (a tool call leaves an activity card),
the HTTP API and the socket frame the page uses. What the owner notices: the transcript,
cards, search hits and events are gone, the name stays, the next answer's model request
carries none of the old messages, and a running answer is stopped first.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings

from conversations import clearing
from conversations.clearing import conversation_clear
from conversations.models import Conversation, Event, Message, SearchEntry, Turn
from conversations.search import conversations_search
from conversations.services import conversation_rename
from flarebot.asgi import application
from tests.support.engine import (
    ask,
    events,
    eventually,
    new_conversation,
    orm,
    run,
    sent,
    submit,
    turn_get,
)
from tests.support.fake_providers import Call, Stall, Text
from tools.models import ToolActivity

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


async def a_conversation_with_history(cancels, fake_providers) -> uuid.UUID:
    conversation_id = await new_conversation()
    await orm(conversation_rename)(conversation_id=conversation_id, name="Holiday plans")
    fake_providers.script([Call("c1", "recall", {"query": "paris"})], [Text("Paris in May, with the blue suitcase.")])
    turn = await ask(conversation_id, "Where do we go in May?", cancels)
    assert turn.status == "completed"
    return conversation_id


def shown(conversation_id) -> dict[str, int]:
    return {
        "messages": Message.objects.filter(conversation_id=conversation_id).count(),
        "activities": ToolActivity.objects.filter(conversation_id=conversation_id).count(),
        "message_search_entries": SearchEntry.objects.filter(
            conversation_id=conversation_id, message__isnull=False
        ).count(),
    }


async def test_it_removes_what_was_shown_and_keeps_the_name(anthropic, cancels, fake_providers):
    conversation_id = await a_conversation_with_history(cancels, fake_providers)
    before = await orm(shown)(conversation_id)
    assert before == {"messages": 2, "activities": 1, "message_search_entries": 2}
    last = (await events(conversation_id))[-1].sequence

    conversation = await orm(conversation_clear)(conversation_id=conversation_id)

    assert conversation.name == "Holiday plans"
    assert await orm(shown)(conversation_id) == {"messages": 0, "activities": 0, "message_search_entries": 0}
    [cleared] = await events(conversation_id)
    assert (cleared.kind, cleared.sequence, cleared.data) == ("conversation.cleared", last + 1, {})
    # The turn stays as an id-only tombstone.
    [turn] = await orm(lambda: list(Turn.objects.filter(conversation_id=conversation_id)))()
    assert (turn.provider, turn.model, turn.error_message) == ("", "", "")
    # Search finds the name, not the old message text.
    assert [r["message_id"] for r in await orm(conversations_search)(query="Holiday")] == [None]
    assert await orm(conversations_search)(query="suitcase") == []


async def test_the_next_answer_carries_none_of_the_old_messages(anthropic, cancels, fake_providers):
    conversation_id = await a_conversation_with_history(cancels, fake_providers)
    await orm(conversation_clear)(conversation_id=conversation_id)
    fake_providers.script([Text("Hello again.")])

    turn = await ask(conversation_id, "Start over: what is 2 + 2?", cancels)

    assert turn.status == "completed"
    request = sent(anthropic, fake_providers.requests[-1].body)
    assert request.transcript == [("user", "Start over: what is 2 + 2?")]


async def test_a_replayed_message_after_the_clear_is_recognised_not_sent_again(anthropic, cancels, fake_providers):
    conversation_id = await new_conversation()
    request_id = uuid.uuid4()
    fake_providers.script([Text("Done.")])
    first = await submit(conversation_id, "Once.", request_id=request_id)
    await run(first.id, cancels)
    await orm(conversation_clear)(conversation_id=conversation_id)

    replayed = await submit(conversation_id, "Once.", request_id=request_id)

    assert replayed.id == first.id
    assert await orm(Message.objects.filter(conversation_id=conversation_id).count)() == 0


async def test_a_running_answer_is_stopped_first(anthropic, cancels, fake_providers):
    conversation_id = await new_conversation()
    fake_providers.script([Text("Thinking"), Stall(30), Text(" never comes")])
    turn = await submit(conversation_id, "Take your time.", request_id=uuid.uuid4())
    running = asyncio.create_task(run(turn.id, cancels))
    await eventually(lambda: _has_text(turn.id), timeout=10, what="the answer to start")

    await orm(conversation_clear)(conversation_id=conversation_id)
    await asyncio.wait_for(running, 10)

    assert (await turn_get(turn.id)).status == "cancelled"
    assert await orm(Message.objects.filter(conversation_id=conversation_id).count)() == 0
    assert [e.kind for e in await events(conversation_id)] == ["conversation.cleared"]


async def _has_text(turn_id) -> bool:
    return await orm(Event.objects.filter(turn_id=turn_id, kind="text.delta").exists)()


def test_an_answer_that_does_not_stop_in_time_refuses_the_clear_and_removes_nothing(owner_client, monkeypatch, owner):
    conversation = Conversation.objects.create(name="Busy")
    from conversations.turns import turn_submit

    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Keep going.")
    # A live attempt holds the turn and never answers the stop (its worker is elsewhere, stuck).
    from datetime import timedelta

    from django.utils import timezone

    Turn.objects.filter(id=turn.id).update(
        status="running", lease_token="t" * 32, lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
    monkeypatch.setattr(clearing, "STOP_TIMEOUT", 0.3)
    before = Message.objects.filter(conversation_id=conversation.id).count()

    response = owner_client.post(f"/api/conversations/{conversation.id}/clear/", content_type="application/json")

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "clear_busy"
    assert Message.objects.filter(conversation_id=conversation.id).count() == before == 1
    assert not Event.objects.filter(conversation_id=conversation.id, kind="conversation.cleared").exists()


def test_the_api_clears_and_answers_with_the_conversation(owner_client, owner):
    conversation = Conversation.objects.create(name="Notes")

    response = owner_client.post(f"/api/conversations/{conversation.id}/clear/", content_type="application/json")

    assert response.status_code == 200, response.content
    assert response.json()["name"] == "Notes"
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize("body", [{"all": True}, {"confirm": "yes"}])
def test_the_api_refuses_a_body_and_clears_nothing(owner_client, owner, body):
    conversation = Conversation.objects.create(name="Notes")
    Event.objects.create(conversation=conversation, sequence=1, kind="turn.completed", data={})

    response = owner_client.post(
        f"/api/conversations/{conversation.id}/clear/", json.dumps(body), content_type="application/json"
    )

    assert response.status_code == 400
    assert Event.objects.filter(conversation=conversation).count() == 1


@pytest.mark.parametrize("conversation_id", [str(uuid.uuid4()), "not-a-uuid"])
def test_the_api_answers_an_unknown_conversation_in_the_contracts_shape(owner_client, owner, conversation_id):
    response = owner_client.post(f"/api/conversations/{conversation_id}/clear/", content_type="application/json")

    assert response.status_code in (400, 404)
    assert response.json()["error"]["code"] in ("invalid_id", "conversation_not_found")


def test_a_deleted_conversation_cannot_be_cleared(owner_client, owner, django_capture_on_commit_callbacks):
    conversation = Conversation.objects.create(name="Gone")
    Conversation.objects.filter(id=conversation.id).update(state="deleting")

    response = owner_client.post(f"/api/conversations/{conversation.id}/clear/", content_type="application/json")

    assert (response.status_code, response.json()["error"]["code"]) == (404, "conversation_not_found")


async def test_the_socket_frame_clears_and_every_socket_hears_it(owner, owner_client):
    conversation = await orm(Conversation.objects.create)(name="Shared")
    await orm(Event.objects.create)(conversation=conversation, sequence=1, kind="turn.completed", data={})
    await orm(Conversation.objects.filter(id=conversation.id).update)(last_sequence=1)
    key = owner_client.cookies[settings.SESSION_COOKIE_NAME].value
    headers = [
        (b"origin", settings.FLAREBOT_ORIGIN.encode()),
        (b"cookie", f"{settings.SESSION_COOKIE_NAME}={key}".encode()),
    ]
    path = f"/ws/conversations/{conversation.id}/?last_sequence=1"
    one, other = WebsocketCommunicator(application, path, headers), WebsocketCommunicator(application, path, headers)
    assert (await one.connect())[0]
    assert (await other.connect())[0]
    try:
        await one.send_to(text_data=json.dumps({"type": "clear_history"}))

        for socket in (one, other):
            frame = json.loads(await socket.receive_from(timeout=10))
            assert (frame["type"], frame["event"], frame["sequence"]) == ("event", "conversation.cleared", 2)
    finally:
        await one.disconnect()
        await other.disconnect()
    assert await orm(Event.objects.filter(conversation=conversation).count)() == 1
