"""Sending attachments with a message, over HTTP and the socket; a refused message stores nothing."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings

from attachments import services
from attachments.limits import FILE_MAX, MESSAGE_FILES_MAX
from attachments.models import Attachment, MediaType
from attachments.storage import tmp_dir
from attachments.uploads import Upload
from conversations import services as conversations
from conversations.models import Conversation, Message, MessageRole, Turn
from flarebot.asgi import application
from tests.attachments.support import png, upload

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(owner):
    return conversations.conversation_create(name="Files")


def send(client, conversation_id, *, text: str = "", attachments=None, request_id=None, **extra):
    body = {"request_id": str(request_id or uuid.uuid4()), "text": text, **extra}
    if attachments is not None:
        body["attachments"] = attachments
    return client.post(
        f"/api/conversations/{conversation_id}/messages/", json.dumps(body), content_type="application/json"
    )


def stored_file(conversation_id, size: int, name: str = "big.txt") -> Attachment:
    """An attachment of `size` bytes, stored as an upload would be (without going through HTTP)."""
    path = tmp_dir() / f"upload-{uuid.uuid4()}"
    path.write_bytes(b"a" * (size - 1) + b"\n")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return services.attachment_create(
        conversation_id=conversation_id, upload=Upload(path, name, MediaType.TEXT, size, digest)
    )


def user_parts(turn_id) -> list[dict]:
    return Message.objects.get(turn_id=turn_id, role=MessageRole.USER).parts


def assert_refused(response, status: int, code: str, conversation) -> None:
    assert response.status_code == status, response.content
    assert response.json()["error"]["code"] == code
    assert not Turn.objects.filter(conversation=conversation).exists()
    assert not Attachment.objects.filter(message__isnull=False).exists()


def test_it_sends_attachments_after_the_text(owner_client, conversation):
    shot = upload(owner_client, conversation.id, "shot.png", png()).json()
    notes = upload(owner_client, conversation.id, "notes.md", b"# Notes\n").json()

    response = send(owner_client, conversation.id, text="What is this?", attachments=[shot["id"], notes["id"]])

    assert response.status_code == 202, response.content
    turn_id = response.json()["turn_id"]
    assert user_parts(turn_id) == [
        {"type": "text", "text": "What is this?"},
        {"type": "attachment", "id": shot["id"], "name": "shot.png", "media_type": "image/png", "size": shot["size"]},
        {"type": "attachment", "id": notes["id"], "name": "notes.md", "media_type": "text/markdown", "size": 8},
    ]
    message = owner_client.get(f"/api/conversations/{conversation.id}/messages/").json()["messages"][0]
    assert message["parts"] == user_parts(turn_id)
    assert set(Attachment.objects.values_list("message__turn_id", flat=True)) == {uuid.UUID(turn_id)}


def test_a_message_may_be_only_attachments(owner_client):
    conversation = conversations.conversation_create()
    shot = upload(owner_client, conversation.id, "shot.png", png()).json()

    response = send(owner_client, conversation.id, text="", attachments=[shot["id"]])

    assert response.status_code == 202, response.content
    assert user_parts(response.json()["turn_id"])[0] == {"type": "text", "text": ""}
    conversation.refresh_from_db()
    assert conversation.name == "shot.png"


def test_a_file_attached_before_any_conversation_creates_none_and_goes_with_the_first_message(owner_client, owner):
    notes = upload(owner_client, None, "notes.txt", b"Buy milk.\n")

    assert notes.status_code == 201, notes.content
    assert not Conversation.objects.exists()
    conversation = conversations.conversation_create()
    response = send(owner_client, conversation.id, text="Summarise", attachments=[notes.json()["id"]])

    assert response.status_code == 202, response.content
    assert user_parts(response.json()["turn_id"])[1]["name"] == "notes.txt"
    claimed = Attachment.objects.get(id=notes.json()["id"])
    turn_id = uuid.UUID(response.json()["turn_id"])
    assert (claimed.conversation_id, claimed.message.turn_id) == (conversation.id, turn_id)
    other = conversations.conversation_create(name="Other")
    again = send(owner_client, other.id, text="Again", attachments=[notes.json()["id"]])
    assert again.status_code == 400, again.content  # claimed: no other message takes it


def test_a_message_with_neither_text_nor_attachments_is_refused(owner_client, conversation):
    assert_refused(send(owner_client, conversation.id, text=""), 400, "invalid_text", conversation)
    assert_refused(send(owner_client, conversation.id, text="", attachments=[]), 400, "invalid_text", conversation)


def test_it_takes_10_files_and_refuses_11(owner_client, conversation):
    ids = [upload(owner_client, conversation.id, f"{i}.txt", f"{i}\n".encode()).json()["id"] for i in range(11)]

    assert_refused(send(owner_client, conversation.id, attachments=ids), 400, "invalid_attachment", conversation)
    response = send(owner_client, conversation.id, attachments=ids[:MESSAGE_FILES_MAX])

    assert response.status_code == 202, response.content
    assert len(user_parts(response.json()["turn_id"])) == 1 + MESSAGE_FILES_MAX


def test_it_takes_100_mb_and_refuses_one_byte_more(owner_client, conversation):
    five = [str(stored_file(conversation.id, FILE_MAX).id) for _ in range(5)]
    one_byte = str(stored_file(conversation.id, 1, "b").id)

    assert_refused(send(owner_client, conversation.id, attachments=[*five, one_byte]), 413, "too_large", conversation)
    response = send(owner_client, conversation.id, attachments=five)

    assert response.status_code == 202, response.content


@pytest.mark.parametrize("which", ["unknown", "other_conversation", "not_an_id", "twice", "sent_before"])
def test_it_refuses_attachments_that_are_not_this_messages_to_take(owner_client, conversation, which):
    other = conversations.conversation_create(name="Other")
    mine = upload(owner_client, conversation.id, "a.txt", b"a\n").json()["id"]
    theirs = upload(owner_client, other.id, "b.txt", b"b\n").json()["id"]
    if which == "sent_before":
        assert send(owner_client, other.id, attachments=[theirs]).status_code == 202
    bad = {
        "unknown": [mine, str(uuid.uuid4())],
        "other_conversation": [mine, theirs],
        "not_an_id": [mine, "../../etc/passwd"],
        "twice": [mine, mine],
        "sent_before": [mine, theirs],
    }[which]

    response = send(owner_client, conversation.id, text="Look", attachments=bad)

    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid_attachment"
    assert not Turn.objects.filter(conversation=conversation).exists()
    assert Attachment.objects.get(id=mine).message_id is None


def test_a_repeated_request_returns_the_same_turn(owner_client, conversation):
    shot = upload(owner_client, conversation.id, "shot.png", png()).json()
    request_id = uuid.uuid4()

    first = send(owner_client, conversation.id, attachments=[shot["id"]], request_id=request_id)
    again = send(owner_client, conversation.id, attachments=[shot["id"]], request_id=request_id)

    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    assert Turn.objects.filter(conversation=conversation).count() == 1


def test_a_version_keeps_the_messages_attachments(owner_client, conversation):
    shot = upload(owner_client, conversation.id, "shot.png", png()).json()
    turn_id = send(owner_client, conversation.id, text="What is this?", attachments=[shot["id"]]).json()["turn_id"]
    Turn.objects.filter(id=turn_id).update(status="completed")
    attachment_part = user_parts(turn_id)[1]

    again = send(owner_client, conversation.id, text="What is this?", version_of=turn_id)
    Turn.objects.filter(id=again.json()["turn_id"]).update(status="completed")
    edited = send(owner_client, conversation.id, text="And this?", version_of=again.json()["turn_id"])
    with_files = send(owner_client, conversation.id, text="x", version_of=turn_id, attachments=[shot["id"]])

    assert user_parts(again.json()["turn_id"]) == user_parts(turn_id)
    assert user_parts(edited.json()["turn_id"]) == [{"type": "text", "text": "And this?"}, attachment_part]
    assert with_files.status_code == 400
    assert with_files.json()["error"]["code"] == "invalid_attachment"


@pytest.mark.django_db(transaction=True)
async def test_the_socket_takes_attachments(owner_client, conversation):
    shot = await database_sync_to_async(upload)(owner_client, conversation.id, "shot.png", png())
    shot_id = shot.json()["id"]
    cookie = f"{settings.SESSION_COOKIE_NAME}={owner_client.cookies[settings.SESSION_COOKIE_NAME].value}"
    headers = [(b"origin", settings.FLAREBOT_ORIGIN.encode()), (b"cookie", cookie.encode())]
    socket = WebsocketCommunicator(application, f"/ws/conversations/{conversation.id}/", headers=headers)
    assert (await socket.connect(timeout=30))[0]
    try:
        await socket.send_to(
            text_data=json.dumps(
                {"type": "user_message", "request_id": str(uuid.uuid4()), "text": "", "attachments": ["nope"]}
            )
        )
        refused = json.loads(await socket.receive_from(timeout=30))
        await socket.send_to(
            text_data=json.dumps(
                {"type": "user_message", "request_id": str(uuid.uuid4()), "text": "", "attachments": [shot_id]}
            )
        )
        ack = json.loads(await socket.receive_from(timeout=30))
    finally:
        await socket.disconnect(timeout=5)

    assert refused["type"] == "error"
    assert refused["code"] == "invalid_attachment"
    assert ack["type"] == "ack"
    parts = await database_sync_to_async(user_parts)(ack["turn_id"])
    assert parts[1]["id"] == shot_id
