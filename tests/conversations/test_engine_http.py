"""The transcript endpoints around the turn engine: submit, read messages and events, cancel.

The turns these tests run go through the real engine against the loopback Anthropic
server; the database is transactional because the engine writes from its own threads.
"""

from __future__ import annotations

import json
import uuid

import pytest
from asgiref.sync import async_to_sync

from conversations.cancel_bus import CancelListener
from conversations.models import Conversation, Event, Message, Turn
from tests.support.engine import append_events_by_hand, engine_cleanup, provider_use, run
from tests.support.fake_providers import HttpError, Text

pytestmark = pytest.mark.django_db(transaction=True)

BASE = "/api/conversations/"


def messages_url(conversation_id: object) -> str:
    return f"{BASE}{conversation_id}/messages/"


def events_url(conversation_id: object, after: object | None = None) -> str:
    return f"{BASE}{conversation_id}/events/" + ("" if after is None else f"?after={after}")


def cancel_url(conversation_id: object) -> str:
    return f"{BASE}{conversation_id}/cancel/"


def post(client, url: str, body: object):
    return client.post(url, json.dumps(body), content_type="application/json")


def send(client, conversation_id: object, text: str, request_id: object | None = None):
    return post(client, messages_url(conversation_id), {"request_id": str(request_id or uuid.uuid4()), "text": text})


def assert_error(response, status: int) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert isinstance(body["error"]["code"], str)
    assert body["error"]["message"]


def stored() -> tuple[int, int, int]:
    return Turn.objects.count(), Message.objects.count(), Event.objects.count()


def run_turn_to_the_end(turn_id: str) -> None:
    async def go() -> None:
        listener = CancelListener()
        try:
            await run(uuid.UUID(turn_id), listener)
        finally:
            await engine_cleanup(listener)

    async_to_sync(go)()


@pytest.fixture
def conversation(owner) -> Conversation:
    return Conversation.objects.create(name="Engine over HTTP")


def test_it_accepts_a_message_with_202_and_returns_the_same_turn_for_the_same_request_id(owner_client, conversation):
    request_id = uuid.uuid4()

    first = send(owner_client, conversation.id, "Plan my week.", request_id)
    again = send(owner_client, conversation.id, "Plan my week.", request_id)

    assert (first.status_code, again.status_code) == (202, 202)
    assert first.json() == again.json()
    assert set(first.json()) == {"turn_id"}
    assert first["Cache-Control"] == "no-store"
    turn = Turn.objects.get()
    assert str(turn.id) == first.json()["turn_id"]
    assert (turn.status, turn.request_id) == ("queued", request_id)
    assert list(Message.objects.values_list("role", "parts")) == [("user", [{"type": "text", "text": "Plan my week."}])]
    assert list(Event.objects.values_list("sequence", "kind")) == [(1, "turn.queued")]


@pytest.mark.parametrize(
    "body",
    [
        {"request_id": "not-a-uuid", "text": "Hi"},
        {"request_id": 12, "text": "Hi"},
        {"text": "Hi"},
        {"request_id": "REQUEST", "text": ""},
        {"request_id": "REQUEST", "text": "x" * 32_001},
        {"request_id": "REQUEST", "text": "😀" * 16_001},  # 32,002 UTF-16 code units
        {"request_id": "REQUEST", "text": "before\x00after"},
        {"request_id": "REQUEST", "text": "   \n"},
        {"request_id": "REQUEST", "text": ["Hi"]},
        {"request_id": "REQUEST", "text": "Hi", "priority": "high"},
    ],
    ids=[
        "request-id-not-a-uuid",
        "request-id-not-a-string",
        "no-request-id",
        "empty-text",
        "32001-characters",
        "32002-utf16-units",
        "nul",
        "blank",
        "text-not-a-string",
        "extra-field",
    ],
)
def test_it_refuses_an_invalid_message_and_stores_nothing(owner_client, conversation, body):
    if body.get("request_id") == "REQUEST":
        body = {**body, "request_id": str(uuid.uuid4())}

    response = post(owner_client, messages_url(conversation.id), body)

    assert_error(response, 400)
    assert stored() == (0, 0, 0)


@pytest.mark.parametrize("text", ["x" * 32_000, "😀" * 16_000], ids=["32000-characters", "32000-utf16-units"])
def test_it_accepts_a_message_of_exactly_32000_characters(owner_client, conversation, text):
    response = send(owner_client, conversation.id, text)

    assert response.status_code == 202
    assert Message.objects.get().parts == [{"type": "text", "text": text}]


def test_it_lists_user_and_assistant_messages_in_order_with_the_last_sequence(
    owner_client, conversation, settings, fake_providers
):
    provider_use("anthropic", settings=settings, fake_providers=fake_providers)
    fake_providers.script([Text("Monday: "), Text("gym.", delay=0.05)], [Text("Tuesday: rest.")])
    first = send(owner_client, conversation.id, "Monday?").json()["turn_id"]
    run_turn_to_the_end(first)
    second = send(owner_client, conversation.id, "Tuesday?").json()["turn_id"]
    run_turn_to_the_end(second)

    response = owner_client.get(messages_url(conversation.id))

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"messages", "last_sequence", "turns"}
    assert body["turns"] == [
        {"id": first, "status": "completed", "error": None, "answer_versions": []},
        {"id": second, "status": "completed", "error": None, "answer_versions": []},
    ]
    listed = [(m["role"], m["turn_id"], "".join(p["text"] for p in m["parts"])) for m in body["messages"]]
    assert listed == [
        ("user", first, "Monday?"),
        ("assistant", first, "Monday: gym."),
        ("user", second, "Tuesday?"),
        ("assistant", second, "Tuesday: rest."),
    ]
    assert all(set(m) == {"id", "role", "parts", "created_at", "turn_id", "versions"} for m in body["messages"])
    assert all(m["versions"] == [] for m in body["messages"])  # one version of each
    last_sequence, last_kind = Event.objects.order_by("-sequence").values_list("sequence", "kind")[0]
    assert last_kind == "turn.completed"
    assert body["last_sequence"] == last_sequence
    assert owner_client.get(events_url(conversation.id)).json()["last_sequence"] == last_sequence


def test_it_lists_a_queued_turn_so_a_reloaded_page_knows_one_is_pending(owner_client, conversation):
    turn_id = send(owner_client, conversation.id, "Later?").json()["turn_id"]

    body = owner_client.get(messages_url(conversation.id)).json()

    assert body["turns"] == [{"id": turn_id, "status": "queued", "error": None, "answer_versions": []}]


def test_it_pages_events_after_a_sequence_500_at_a_time(owner_client, conversation):
    turn_id = uuid.UUID(send(owner_client, conversation.id, "Write a long essay.").json()["turn_id"])
    append_events_by_hand(conversation.id, turn_id, 600)  # sequences 2..601

    pages = {after: owner_client.get(events_url(conversation.id, after)).json() for after in (0, 500, 598, 601)}

    assert [e["sequence"] for e in pages[0]["events"]] == list(range(1, 501))
    assert [e["sequence"] for e in pages[500]["events"]] == list(range(501, 602))
    assert [e["sequence"] for e in pages[598]["events"]] == [599, 600, 601]
    assert pages[601]["events"] == []
    assert {page["last_sequence"] for page in pages.values()} == {601}
    assert pages[0]["events"][0]["event"] == "turn.queued"
    assert pages[598]["events"][0] == {
        "sequence": 599,
        "event": "text.delta",
        "turn_id": str(turn_id),
        "data": {"text": "w597 "},
    }
    assert owner_client.get(events_url(conversation.id)).json() == pages[0]


@pytest.mark.parametrize("after", ["-1", "abc", "1.5", "", "1e3"])
def test_it_refuses_a_malformed_after(owner_client, conversation, after):
    send(owner_client, conversation.id, "Hello.")

    assert_error(owner_client.get(events_url(conversation.id, after)), 400)


def test_it_cancels_a_queued_turn(owner_client, conversation):
    turn_id = send(owner_client, conversation.id, "Never mind.").json()["turn_id"]

    response = post(owner_client, cancel_url(conversation.id), {})

    assert response.status_code == 202
    turn = Turn.objects.get()
    assert (str(turn.id), turn.status) == (turn_id, "cancelled")
    events = owner_client.get(events_url(conversation.id, 1)).json()["events"]
    assert [(e["event"], e["turn_id"]) for e in events] == [("turn.cancelled", turn_id)]


def test_it_answers_404_for_an_unknown_or_deleted_conversation(owner_client, conversation):
    deleted = Conversation.objects.create(name="Gone")
    assert owner_client.delete(f"{BASE}{deleted.id}/").status_code == 204

    for conversation_id in (uuid.uuid4(), deleted.id):
        assert_error(send(owner_client, conversation_id, "Hello?"), 404)
        assert_error(owner_client.get(messages_url(conversation_id)), 404)
        assert_error(owner_client.get(events_url(conversation_id, 0)), 404)
        assert_error(post(owner_client, cancel_url(conversation_id), {}), 404)
    assert stored() == (0, 0, 0)


def test_it_lists_no_empty_answer_for_a_turn_that_failed_before_any_text(owner_client, conversation, fake_providers):
    provider_use("anthropic", settings=None, fake_providers=fake_providers)
    fake_providers.script([HttpError(401, {"type": "error", "error": {"type": "authentication_error"}})])
    turn_id = send(owner_client, conversation.id, "Hello?").json()["turn_id"]

    run_turn_to_the_end(turn_id)

    assert Turn.objects.get(id=turn_id).status == "failed"
    body = owner_client.get(messages_url(conversation.id)).json()
    assert [(m["role"], m["parts"]) for m in body["messages"]] == [("user", [{"type": "text", "text": "Hello?"}])]
    [turn] = body["turns"]
    assert (turn["id"], turn["status"], turn["error"]["code"]) == (turn_id, "failed", "provider_auth")
    assert "rejected the API key" in turn["error"]["message"]
    assert body["last_sequence"] == Event.objects.filter(conversation=conversation).count()
