"""Versions of messages (issue 27.1): Regenerate, Retry and Edit add versions instead of piling up turns.

What the owner notices: the transcript shows one branch with the versions of each message
and answer; the model, search and export see only that branch; a switch is kept on the
server; a failed answer that was retried is replaced. On both databases, through the HTTP
API the page uses; the engine test runs a real turn against the loopback providers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from conversations.models import Conversation, Event, Message, MessageRole, Turn
from conversations.services import conversation_create
from conversations.turns import turn_claim, turn_finish
from tests.conversations.test_consumers import (
    CLOSE_TIMEOUT,
    conversation_path,
    open_socket,
    owner_headers,
    session_key_of,
    sockets,  # noqa: F401  (a fixture)
)
from tests.support.engine import ask, assistant_text, new_conversation, orm, run, sent
from tests.support.fake_providers import Text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


def url(conversation_id, what: str) -> str:
    return f"/api/conversations/{conversation_id}/{what}/"


def send(client, conversation_id, text: str, *, version_of=None, request_id=None):
    body = {"request_id": str(request_id or uuid.uuid4()), "text": text}
    if version_of is not None:
        body["version_of"] = str(version_of)
    return client.post(url(conversation_id, "messages"), body, content_type="application/json")


def answered(client, conversation_id, text: str, answer: str, *, version_of=None, status="completed") -> str:
    """Send a message (or a version) and finish its turn with this answer, as the engine would."""
    response = send(client, conversation_id, text, version_of=version_of)
    assert response.status_code == 202, response.content
    turn_id = uuid.UUID(response.json()["turn_id"])
    claim = turn_claim(turn_id=turn_id)
    assert claim is not None
    turn = Turn.objects.get(id=turn_id)
    if answer:
        Message.objects.create(
            conversation_id=conversation_id,
            turn=turn,
            role=MessageRole.ASSISTANT,
            ordinal=2 * turn.ordinal + 1,
            parts=[{"type": "text", "text": answer}],
        )
    code, message = ("provider_unavailable", "The provider failed.") if status == "failed" else ("", "")
    assert turn_finish(turn_id=turn_id, lease_token=claim.lease_token, status=status, code=code, message=message)
    return str(turn_id)


def transcript(client, conversation_id) -> dict:
    response = client.get(url(conversation_id, "messages"))
    assert response.status_code == 200, response.content
    return response.json()


def shown(client, conversation_id) -> list[tuple[str, str, list[str]]]:
    """(role, text, versions) of each message the page shows."""
    return [
        (m["role"], "".join(p.get("text", "") for p in m["parts"]), m["versions"])
        for m in transcript(client, conversation_id)["messages"]
    ]


def switch(client, conversation_id, turn_id):
    return client.post(url(conversation_id, "branch"), {"turn_id": str(turn_id)}, content_type="application/json")


def test_regenerate_adds_a_version_of_the_answer_not_another_turn(owner_client):
    conversation = conversation_create()
    first = answered(owner_client, conversation.id, "Name a colour.", "Blue.")

    second = answered(owner_client, conversation.id, "Name a colour.", "Green.", version_of=first)

    assert shown(owner_client, conversation.id) == [
        ("user", "Name a colour.", []),
        ("assistant", "Green.", [first, second]),
    ]
    [turn] = transcript(owner_client, conversation.id)["turns"]
    assert turn["id"] == second
    assert turn["answer_versions"] == [first, second]


def test_edit_starts_a_branch_and_switching_back_restores_the_old_one(owner_client):
    conversation = conversation_create()
    answered(owner_client, conversation.id, "I live in Porto.", "Noted.")
    asked = answered(owner_client, conversation.id, "Suggest a walk.", "Along the Douro.")
    after = answered(owner_client, conversation.id, "How long is it?", "About an hour.")

    edited = answered(owner_client, conversation.id, "Suggest a museum.", "Serralves.", version_of=asked)

    assert [text for _, text, _ in shown(owner_client, conversation.id)] == [
        "I live in Porto.",
        "Noted.",
        "Suggest a museum.",
        "Serralves.",
    ]
    assert shown(owner_client, conversation.id)[2][2] == [asked, edited]

    response = switch(owner_client, conversation.id, asked)

    # Switching to the first text shows its branch to its end, the later turn included.
    assert response.status_code == 200, response.content
    assert response.json() == {"head_turn_id": after}
    assert [text for _, text, _ in shown(owner_client, conversation.id)] == [
        "I live in Porto.",
        "Noted.",
        "Suggest a walk.",
        "Along the Douro.",
        "How long is it?",
        "About an hour.",
    ]
    assert shown(owner_client, conversation.id)[2][2] == [asked, edited]
    event = Event.objects.filter(conversation_id=conversation.id).order_by("-sequence").first()
    assert (event.kind, event.data) == ("conversation.branch_switched", {"turn_id": after})

    # A message sent now follows the shown branch.
    next_turn = answered(owner_client, conversation.id, "And back?", "The same way.")
    assert Turn.objects.get(id=next_turn).parent_turn_id == uuid.UUID(after)


def test_retry_after_a_failure_replaces_the_failed_answer(owner_client):
    conversation = conversation_create()
    failed = answered(owner_client, conversation.id, "Summarise the news.", "", status="failed")

    retried = answered(owner_client, conversation.id, "Summarise the news.", "Nothing new.", version_of=failed)

    assert shown(owner_client, conversation.id) == [
        ("user", "Summarise the news.", []),
        ("assistant", "Nothing new.", []),
    ]
    assert [t["id"] for t in transcript(owner_client, conversation.id)["turns"]] == [retried]


async def test_the_model_sees_only_the_shown_branch(owner_client, provider, fake_providers, cancels):
    conversation_id = await new_conversation()
    fake_providers.script([Text("Blue.")], [Text("Green.")], [Text("You asked for a colour.")])
    first = await ask(conversation_id, "Name a colour.", cancels)
    response = await orm(send)(owner_client, conversation_id, "Name a colour.", version_of=first.id)
    assert response.status_code == 202, response.content
    await run(uuid.UUID(response.json()["turn_id"]), cancels)

    last = await ask(conversation_id, "What did I ask?", cancels)

    assert await assistant_text(last.id) == "You asked for a colour."
    assert sent(provider, fake_providers.requests[-1].body).transcript == [
        ("user", "Name a colour."),
        ("assistant", "Green."),
        ("user", "What did I ask?"),
    ]


def test_search_and_export_see_only_the_shown_branch(owner_client):
    conversation = conversation_create()
    asked = answered(owner_client, conversation.id, "Tell me about otters.", "Otters hold hands.")
    answered(owner_client, conversation.id, "Tell me about beavers.", "Beavers build dams.", version_of=asked)

    otters = owner_client.get("/api/conversations/", {"q": "otters"}).json()["results"]
    beavers = owner_client.get("/api/conversations/", {"q": "beavers"}).json()["results"]
    exported = owner_client.get(url(conversation.id, "export"), {"format": "md"}).content.decode()

    assert otters == []
    assert [r["conversation"]["id"] for r in beavers] == [str(conversation.id)]
    assert "beavers" in exported.lower()
    assert "otters" not in exported.lower()

    assert switch(owner_client, conversation.id, asked).status_code == 200
    assert owner_client.get("/api/conversations/", {"q": "beavers"}).json()["results"] == []
    assert len(owner_client.get("/api/conversations/", {"q": "otters"}).json()["results"]) == 1


def test_editing_the_first_message_titles_the_conversation_again(owner_client):
    conversation = conversation_create()
    first = answered(owner_client, conversation.id, "Plan a trip to Lisbon", "Day one: Alfama.")

    answered(owner_client, conversation.id, "Plan a trip to Madrid", "Day one: the Prado.", version_of=first)

    assert Conversation.objects.get(id=conversation.id).name == "Plan a trip to Madrid"


def test_versions_and_switches_are_refused_while_an_answer_is_written_and_change_nothing(owner_client):
    conversation = conversation_create()
    first = answered(owner_client, conversation.id, "Name a colour.", "Blue.")
    running = send(owner_client, conversation.id, "Name a fruit.")
    assert running.status_code == 202
    before = (Turn.objects.count(), Event.objects.count())

    version = send(owner_client, conversation.id, "Name a colour.", version_of=first)
    switched = switch(owner_client, conversation.id, first)

    for response in (version, switched):
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "branch_busy"
    assert (Turn.objects.count(), Event.objects.count()) == before


@pytest.mark.parametrize(
    "target",
    ["unknown", "other-conversation", "hidden"],
)
def test_a_version_of_a_turn_not_shown_here_is_refused_and_changes_nothing(owner_client, target):
    conversation, other = conversation_create(), conversation_create()
    first = answered(owner_client, conversation.id, "Name a colour.", "Blue.")
    elsewhere = answered(owner_client, other.id, "Name a colour.", "Red.")
    answered(owner_client, conversation.id, "Name a colour!", "Green.", version_of=first)  # hides `first`
    version_of = {"unknown": str(uuid.uuid4()), "other-conversation": elsewhere, "hidden": first}[target]
    before = (Turn.objects.count(), Event.objects.count())

    response = send(owner_client, conversation.id, "Name a colour.", version_of=version_of)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_version"
    assert (Turn.objects.count(), Event.objects.count()) == before


@pytest.mark.parametrize("turn_id", ["not-a-uuid", str(uuid.uuid4())])
def test_a_switch_to_an_unknown_turn_is_refused(owner_client, turn_id):
    conversation = conversation_create()
    answered(owner_client, conversation.id, "Name a colour.", "Blue.")
    before = Event.objects.count()

    response = switch(owner_client, conversation.id, turn_id)

    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"invalid_turn", "invalid_id"}
    assert Event.objects.count() == before


def test_a_repeated_version_request_returns_the_same_turn(owner_client):
    conversation = conversation_create()
    first = answered(owner_client, conversation.id, "Name a colour.", "Blue.")
    request_id = uuid.uuid4()

    one = send(owner_client, conversation.id, "Name a colour.", version_of=first, request_id=request_id)
    two = send(owner_client, conversation.id, "Name a colour.", version_of=first, request_id=request_id)

    assert one.status_code == two.status_code == 202
    assert one.json() == two.json()
    assert Turn.objects.filter(conversation_id=conversation.id).count() == 2


def test_old_clients_see_one_linear_branch(owner_client):
    conversation = conversation_create()
    answered(owner_client, conversation.id, "One.", "1")
    answered(owner_client, conversation.id, "Two.", "2")

    body = transcript(owner_client, conversation.id)

    assert [m["versions"] for m in body["messages"]] == [[], [], [], []]
    assert json.dumps(body).count('"answer_versions": []') == 2


# --- Over the socket, as the page sends it when the socket is open ------------------------------


def mark_of(conversation: Conversation) -> int:
    return Conversation.objects.get(id=conversation.id).last_sequence


async def received(communicator: WebsocketCommunicator, *, after: int) -> dict:
    """The next frame but events up to `after` (a socket opened without a mark replays them)."""
    while True:
        frame = await communicator.receive_json_from(timeout=CLOSE_TIMEOUT)
        if frame["type"] != "event" or frame["sequence"] > after:
            return frame


async def test_a_version_sent_on_the_socket_is_acked_and_switches_every_tab(
    owner_client,
    sockets: Callable[..., WebsocketCommunicator],  # noqa: F811
):
    conversation = await database_sync_to_async(conversation_create)()
    first = await database_sync_to_async(answered)(owner_client, conversation.id, "Name a colour.", "Blue.")
    headers = owner_headers(session_key_of(owner_client))
    path = conversation_path(conversation.id)
    sender = await open_socket(sockets, path, headers)
    other_tab = await open_socket(sockets, path, headers)
    request_id = str(uuid.uuid4())

    frame = {"type": "user_message", "request_id": request_id, "text": "Name a colour.", "version_of": first}
    mark = await database_sync_to_async(mark_of)(conversation)
    await sender.send_json_to(frame)

    ack = await received(sender, after=mark)
    assert (ack["type"], ack["request_id"]) == ("ack", request_id)
    for tab in (sender, other_tab):
        switched = await received(tab, after=mark)
        queued = await tab.receive_json_from(timeout=CLOSE_TIMEOUT)
        assert (switched["event"], switched["data"]) == ("conversation.branch_switched", {"turn_id": ack["turn_id"]})
        assert (queued["event"], queued["turn_id"]) == ("turn.queued", ack["turn_id"])


@pytest.mark.parametrize(
    ("version_of", "code"),
    [("not-a-uuid", "invalid_frame"), (7, "invalid_frame"), (str(uuid.uuid4()), "invalid_version")],
    ids=["not-a-uuid", "not-a-string", "unknown-turn"],
)
async def test_a_bad_version_on_the_socket_gets_an_error_frame_and_stores_nothing(
    owner_client,
    sockets: Callable[..., WebsocketCommunicator],  # noqa: F811
    version_of,
    code,
):
    conversation = await database_sync_to_async(conversation_create)()
    await database_sync_to_async(answered)(owner_client, conversation.id, "Name a colour.", "Blue.")
    communicator = await open_socket(
        sockets, conversation_path(conversation.id), owner_headers(session_key_of(owner_client))
    )
    before = await database_sync_to_async(lambda: (Turn.objects.count(), Event.objects.count()))()

    frame = {
        "type": "user_message",
        "request_id": str(uuid.uuid4()),
        "text": "Name a colour.",
        "version_of": version_of,
    }
    mark = await database_sync_to_async(mark_of)(conversation)
    await communicator.send_json_to(frame)

    error = await received(communicator, after=mark)
    assert (error["type"], error.get("code")) == ("error", code), error
    assert await database_sync_to_async(lambda: (Turn.objects.count(), Event.objects.count()))() == before


# --- Conversations stored before versions ------------------------------------------------------


def test_a_conversation_stored_before_versions_is_one_branch_and_takes_new_versions(owner_client):
    executor = MigrationExecutor(connection)
    before = [("conversations", "0011_browser_task_corrections")]
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    old_conversation, old_turn, old_message = (
        apps.get_model("conversations", name) for name in ("Conversation", "Turn", "Message")
    )
    conversation = old_conversation.objects.create(name="Older", last_turn_ordinal=2, last_sequence=0)
    turns = []
    for ordinal, (text, answer) in enumerate([("One?", "1"), ("Two?", "2")], start=1):
        turn = old_turn.objects.create(
            conversation=conversation, ordinal=ordinal, request_id=uuid.uuid4(), status="completed"
        )
        for role, body, place in (("user", text, 2 * ordinal), ("assistant", answer, 2 * ordinal + 1)):
            old_message.objects.create(
                conversation=conversation, turn=turn, role=role, ordinal=place, parts=[{"type": "text", "text": body}]
            )
        turns.append(str(turn.id))

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert [text for _, text, _ in shown(owner_client, conversation.id)] == ["One?", "1", "Two?", "2"]
    edited = answered(owner_client, conversation.id, "Two, edited?", "2!", version_of=turns[1])
    assert shown(owner_client, conversation.id) == [
        ("user", "One?", []),
        ("assistant", "1", []),
        ("user", "Two, edited?", [turns[1], edited]),
        ("assistant", "2!", []),
    ]
    after = answered(owner_client, conversation.id, "Three?", "3")
    assert Turn.objects.get(id=after).parent_turn_id == uuid.UUID(edited)
