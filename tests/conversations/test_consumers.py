"""The conversation socket, in process, against the real ASGI application.

Every session cookie comes from a real sign-in through POST /login/; deletions and
sign-outs go through the same services and views the owner uses, and commit in another
thread, so the close reaches the socket through the real channel layer.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any, cast
from urllib.parse import urlencode

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.apps import apps
from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user_model
from django.contrib.auth.hashers import make_password
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from conversations import services
from conversations.frames import MAX_FRAME_BYTES
from conversations.models import Conversation
from flarebot.asgi import application
from flarebot.core.models import Installation
from flarebot.core.sessions import AUTH_AT_KEY, INSTALLATION_KEY
from tests.conftest import signed_in_client
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = settings.FLAREBOT_ORIGIN.encode()
COOKIE_NAME = settings.SESSION_COOKIE_NAME
LIFETIME_SECONDS = settings.FLAREBOT_SESSION_LIFETIME.total_seconds()
CLOSE_TIMEOUT = 5.0


def cookie_header(*session_keys: str) -> tuple[bytes, bytes]:
    return (b"cookie", "; ".join(f"{COOKIE_NAME}={key}" for key in session_keys).encode())


def owner_headers(session_key: str) -> list[tuple[bytes, bytes]]:
    return [(b"origin", ORIGIN), cookie_header(session_key)]


def conversation_path(conversation_id: uuid.UUID | str) -> str:
    return f"/ws/conversations/{conversation_id}/"


def session_key_of(client: Client) -> str:
    return client.cookies[COOKIE_NAME].value


def session_update(session_key: str, **values: Any) -> None:
    """Change stored values of a session, as time passing or another process would."""
    session = SessionStore(session_key=session_key)
    assert session.get(SESSION_KEY) is not None, "the session must be signed in before it is changed"
    for name, value in values.items():
        session[name] = value
    session.save()


def row_counts() -> dict[str, int]:
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


@pytest.fixture
def owner_session(owner_client: Client) -> str:
    return session_key_of(owner_client)


@pytest.fixture
def conversation(owner: Installation) -> Conversation:
    return services.conversation_create(name="Trip to Lisbon")


@pytest.fixture
async def sockets() -> AsyncIterator[Callable[..., WebsocketCommunicator]]:
    """Make communicators on the real application and disconnect them all afterwards."""
    made: list[WebsocketCommunicator] = []

    def make(path: str, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
        communicator = WebsocketCommunicator(application, path, headers=headers)
        made.append(communicator)
        return communicator

    yield make
    for communicator in made:
        if not communicator.future.done():
            await communicator.disconnect(timeout=CLOSE_TIMEOUT)


async def open_socket(
    sockets: Callable[..., WebsocketCommunicator], path: str, headers: list[tuple[bytes, bytes]]
) -> WebsocketCommunicator:
    communicator = sockets(path, headers)
    accepted, detail = await communicator.connect(timeout=CLOSE_TIMEOUT)
    assert accepted, f"the socket was refused with {detail}"
    return communicator


async def expect_close(communicator: WebsocketCommunicator, code: int) -> None:
    message = await communicator.receive_output(timeout=CLOSE_TIMEOUT)
    assert message["type"] == "websocket.close", message
    assert message.get("code") == code


async def send_frame(
    communicator: WebsocketCommunicator, *, text: str | None = None, data: bytes | None = None
) -> None:
    event: dict[str, Any] = {"type": "websocket.receive"}
    if text is not None:
        event["text"] = text
    if data is not None:
        event["bytes"] = data
    await communicator.send_input(event)


async def expect_refused(communicator: WebsocketCommunicator, code: int) -> None:
    """The handshake is accepted and closed at once with the code, with nothing sent before."""
    assert await communicator.connect(timeout=CLOSE_TIMEOUT) == (True, None)
    await expect_close(communicator, code)
    assert await communicator.receive_nothing(timeout=0.1)


async def expect_error_frame(communicator: WebsocketCommunicator, code: str) -> None:
    frame = json.loads(await communicator.receive_from(timeout=CLOSE_TIMEOUT))
    assert set(frame) == {"type", "code", "message"}
    assert frame["type"] == "error"
    assert frame["code"] == code
    assert isinstance(frame["message"], str)
    assert 0 < len(frame["message"]) <= 500


async def expect_still_open(communicator: WebsocketCommunicator) -> None:
    """The socket has not been closed and still answers frames."""
    assert await communicator.receive_nothing(timeout=0.3)
    await send_frame(communicator, text='{"type": "no_such_frame"}')
    await expect_error_frame(communicator, "unknown_frame_type")


# --- The handshake -----------------------------------------------------------------------


def no_cookie(session_key: str) -> list[tuple[bytes, bytes]]:
    return [(b"origin", ORIGIN)]


def tampered_cookie(session_key: str) -> list[tuple[bytes, bytes]]:
    last = "b" if session_key[-1] == "a" else "a"
    return owner_headers(session_key[:-1] + last)


def signed_in_over_8_hours_ago(session_key: str) -> list[tuple[bytes, bytes]]:
    session_update(session_key, **{AUTH_AT_KEY: time.time() - LIFETIME_SECONDS - 1})
    return owner_headers(session_key)


def session_row_expired(session_key: str) -> list[tuple[bytes, bytes]]:
    Session.objects.filter(session_key=session_key).update(expire_date=timezone.now() - timedelta(seconds=1))
    return owner_headers(session_key)


def signed_out_session(session_key: str) -> list[tuple[bytes, bytes]]:
    Session.objects.filter(session_key=session_key).delete()
    return owner_headers(session_key)


@pytest.mark.parametrize(
    "prepare", [no_cookie, tampered_cookie, signed_in_over_8_hours_ago, session_row_expired, signed_out_session]
)
async def test_it_refuses_a_handshake_without_a_live_session_with_4001(
    prepare: Callable[[str], list[tuple[bytes, bytes]]],
    owner_session: str,
    conversation: Conversation,
    sockets: Callable[..., WebsocketCommunicator],
) -> None:
    headers = await database_sync_to_async(prepare)(owner_session)

    communicator = sockets(conversation_path(conversation.id), headers)

    await expect_refused(communicator, 4001)


def wrong_origin(session_key: str) -> list[tuple[bytes, bytes]]:
    return [(b"origin", b"https://evil.example"), cookie_header(session_key)]


def origin_of_another_port(session_key: str) -> list[tuple[bytes, bytes]]:
    scheme_host, port = settings.FLAREBOT_ORIGIN.rsplit(":", 1)
    return [(b"origin", f"{scheme_host}:{int(port) + 1}".encode()), cookie_header(session_key)]


def null_origin(session_key: str) -> list[tuple[bytes, bytes]]:
    return [(b"origin", b"null"), cookie_header(session_key)]


def missing_origin(session_key: str) -> list[tuple[bytes, bytes]]:
    return [cookie_header(session_key)]


def origin_sent_twice(session_key: str) -> list[tuple[bytes, bytes]]:
    return [(b"origin", ORIGIN), (b"origin", ORIGIN), cookie_header(session_key)]


def session_cookie_twice_in_one_header(session_key: str) -> list[tuple[bytes, bytes]]:
    return [(b"origin", ORIGIN), cookie_header(session_key, session_key)]


def session_cookie_in_two_headers(session_key: str) -> list[tuple[bytes, bytes]]:
    return [(b"origin", ORIGIN), cookie_header(session_key), cookie_header(session_key)]


def session_of_another_user(session_key: str) -> list[tuple[bytes, bytes]]:
    guest = get_user_model().objects.create_user(username="guest", password="another-long-passphrase-7")
    client = Client()
    client.force_login(guest)
    guest_key = session_key_of(client)
    installation = Installation.objects.get()
    session_update(guest_key, **{AUTH_AT_KEY: time.time(), INSTALLATION_KEY: str(installation.installation_id)})
    return owner_headers(guest_key)


def session_of_another_installation(session_key: str) -> list[tuple[bytes, bytes]]:
    session_update(session_key, **{INSTALLATION_KEY: str(uuid.uuid4())})
    return owner_headers(session_key)


@pytest.mark.parametrize(
    "prepare",
    [
        wrong_origin,
        origin_of_another_port,
        null_origin,
        missing_origin,
        origin_sent_twice,
        session_cookie_twice_in_one_header,
        session_cookie_in_two_headers,
        session_of_another_user,
        session_of_another_installation,
    ],
)
async def test_it_refuses_a_foreign_origin_or_a_non_owner_with_4003(
    prepare: Callable[[str], list[tuple[bytes, bytes]]],
    owner_session: str,
    conversation: Conversation,
    sockets: Callable[..., WebsocketCommunicator],
) -> None:
    headers = await database_sync_to_async(prepare)(owner_session)

    communicator = sockets(conversation_path(conversation.id), headers)

    await expect_refused(communicator, 4003)


def unknown_conversation(conversation: Conversation) -> str:
    return conversation_path(uuid.uuid4())


def deleted_conversation(conversation: Conversation) -> str:
    services.conversation_delete(conversation_id=conversation.id)
    return conversation_path(conversation.id)


def malformed_id(conversation: Conversation) -> str:
    return conversation_path("not-a-uuid")


def id_with_trailing_garbage(conversation: Conversation) -> str:
    return conversation_path(f"{conversation.id}x")


def unknown_path(conversation: Conversation) -> str:
    return "/ws/elsewhere/"


def conversation_path_without_slash(conversation: Conversation) -> str:
    return f"/ws/conversations/{conversation.id}"


def conversations_root(conversation: Conversation) -> str:
    return "/ws/conversations/"


@pytest.mark.parametrize(
    "prepare",
    [
        unknown_conversation,
        deleted_conversation,
        malformed_id,
        id_with_trailing_garbage,
        unknown_path,
        conversation_path_without_slash,
        conversations_root,
    ],
)
async def test_it_refuses_an_unknown_or_deleted_conversation_with_4004(
    prepare: Callable[[Conversation], str],
    owner_session: str,
    conversation: Conversation,
    sockets: Callable[..., WebsocketCommunicator],
) -> None:
    path = await database_sync_to_async(prepare)(conversation)

    communicator = sockets(path, owner_headers(owner_session))

    await expect_refused(communicator, 4004)


async def test_it_accepts_the_owner_on_an_active_conversation(
    owner_session: str, conversation: Conversation, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    communicator = sockets(conversation_path(conversation.id) + "?last_sequence=0", owner_headers(owner_session))

    assert await communicator.connect(timeout=CLOSE_TIMEOUT) == (True, None)
    await expect_still_open(communicator)


# --- Closing an accepted socket ----------------------------------------------------------


def delete_through_the_service(client: Client, conversation_id: uuid.UUID) -> None:
    services.conversation_delete(conversation_id=conversation_id)


def delete_through_the_api(client: Client, conversation_id: uuid.UUID) -> None:
    response = client.delete(f"/api/conversations/{conversation_id}/")
    assert response.status_code == 204, response.content


@pytest.mark.parametrize("delete", [delete_through_the_service, delete_through_the_api])
async def test_it_closes_the_socket_with_4004_when_its_conversation_is_deleted(
    delete: Callable[[Client, uuid.UUID], None],
    owner_client: Client,
    conversation: Conversation,
    sockets: Callable[..., WebsocketCommunicator],
) -> None:
    communicator = await open_socket(
        sockets, conversation_path(conversation.id), owner_headers(session_key_of(owner_client))
    )

    await sync_to_async(delete)(owner_client, conversation.id)

    await expect_close(communicator, 4004)
    refused = sockets(conversation_path(conversation.id), owner_headers(session_key_of(owner_client)))
    await expect_refused(refused, 4004)


async def test_it_keeps_a_socket_open_when_another_conversation_is_deleted(
    owner_session: str, conversation: Conversation, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    other = await database_sync_to_async(services.conversation_create)(name="Groceries")
    kept = await open_socket(sockets, conversation_path(conversation.id), owner_headers(owner_session))
    closed = await open_socket(sockets, conversation_path(other.id), owner_headers(owner_session))

    await database_sync_to_async(services.conversation_delete)(conversation_id=other.id)

    await expect_close(closed, 4004)
    await expect_still_open(kept)


async def test_it_closes_the_socket_with_4001_when_the_session_expires_while_open(
    owner_session: str, conversation: Conversation, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    expires_at = time.time() + 1.5
    await database_sync_to_async(session_update)(owner_session, **{AUTH_AT_KEY: expires_at - LIFETIME_SECONDS})
    communicator = await open_socket(sockets, conversation_path(conversation.id), owner_headers(owner_session))

    await expect_close(communicator, 4001)

    # The socket lived until its session ran out, not a moment less.
    assert time.time() >= expires_at - 0.1


async def test_it_closes_only_the_signed_out_sessions_sockets_with_4001(
    owner: Installation, owner_client: Client, conversation: Conversation, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    other_client = await sync_to_async(signed_in_client)(owner)
    assert session_key_of(other_client) != session_key_of(owner_client)
    signing_out = await open_socket(
        sockets, conversation_path(conversation.id), owner_headers(session_key_of(owner_client))
    )
    staying = await open_socket(
        sockets, conversation_path(conversation.id), owner_headers(session_key_of(other_client))
    )

    response = await sync_to_async(owner_client.post)("/logout/")

    assert response.status_code == 302
    await expect_close(signing_out, 4001)
    await expect_still_open(staying)


def sign_out_through_the_admin(client: Client, other: Client) -> None:
    response = client.post("/admin/logout/")
    assert response.status_code == 200, response.content


def change_the_password_from_another_session(client: Client, other: Client) -> None:
    response = other.post(
        "/api/account/password/",
        {"current_password": OWNER_PASSWORD, "new_password": NEW_PASSWORD},
        content_type="application/json",
    )
    assert response.status_code == 204, response.content


def change_the_password_in_a_shell(client: Client, other: Client) -> None:
    owner = get_user_model().objects.get(username=OWNER_USERNAME)
    owner.set_password(NEW_PASSWORD)
    owner.save()


def rename_the_owner_in_a_shell(client: Client, other: Client) -> None:
    owner = get_user_model().objects.get(username=OWNER_USERNAME)
    owner.username = "someone-else"
    owner.save()


def deactivate_the_owner_in_a_shell(client: Client, other: Client) -> None:
    get_user_model().objects.get(username=OWNER_USERNAME).__class__.objects.filter(username=OWNER_USERNAME).update(
        is_active=False
    )
    # A queryset update sends no signal: the installation row's save is what tells sockets.
    Installation.objects.get().save()


NEW_PASSWORD = "a-brand-new-owner-passphrase-51"


@pytest.mark.parametrize(
    "end",
    [
        sign_out_through_the_admin,
        change_the_password_from_another_session,
        change_the_password_in_a_shell,
        rename_the_owner_in_a_shell,
        deactivate_the_owner_in_a_shell,
    ],
)
async def test_it_closes_an_open_socket_with_4001_however_its_session_ends(
    end: Callable[[Client, Client], None],
    owner: Installation,
    owner_client: Client,
    conversation: Conversation,
    sockets: Callable[..., WebsocketCommunicator],
) -> None:
    other_client = await sync_to_async(signed_in_client)(owner)
    communicator = await open_socket(
        sockets, conversation_path(conversation.id), owner_headers(session_key_of(owner_client))
    )

    await sync_to_async(end)(owner_client, other_client)

    await expect_close(communicator, 4001)


async def test_it_keeps_sockets_open_when_the_owner_row_changes_in_a_way_sessions_do_not_depend_on(
    owner: Installation, owner_session: str, conversation: Conversation, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    communicator = await open_socket(sockets, conversation_path(conversation.id), owner_headers(owner_session))

    def rename_in_person() -> None:
        user = get_user_model().objects.get(username=OWNER_USERNAME)
        user.first_name = "Ada"
        user.save()

    await database_sync_to_async(rename_in_person)()
    await sync_to_async(signed_in_client)(owner)  # another sign-in stamps last_login

    await expect_still_open(communicator)


def delete_the_session_row(session_key: str) -> None:
    Session.objects.filter(session_key=session_key).delete()


def change_the_password_without_signals(session_key: str) -> None:
    get_user_model().objects.filter(username=OWNER_USERNAME).update(password=make_password(NEW_PASSWORD))


def age_the_session_past_8_hours(session_key: str) -> None:
    session_update(session_key, **{AUTH_AT_KEY: time.time() - LIFETIME_SECONDS - 1})


REQUEST_ID = "5b0e7f0e-3c1a-4f7e-9d2a-0c4b8e6f1a2b"


@pytest.mark.parametrize(
    "end", [delete_the_session_row, change_the_password_without_signals, age_the_session_past_8_hours]
)
@pytest.mark.parametrize(
    "text",
    [
        pytest.param(json.dumps({"type": "user_message", "request_id": REQUEST_ID, "text": "hi"}), id="message"),
        pytest.param("hello there", id="not-understood"),
    ],
)
async def test_it_acts_on_no_frame_once_its_session_ended_unannounced(
    end: Callable[[str], None],
    text: str,
    owner_session: str,
    conversation: Conversation,
    sockets: Callable[..., WebsocketCommunicator],
) -> None:
    communicator = await open_socket(sockets, conversation_path(conversation.id), owner_headers(owner_session))
    await database_sync_to_async(end)(owner_session)
    before = await database_sync_to_async(row_counts)()

    await send_frame(communicator, text=text)

    await expect_close(communicator, 4001)
    assert await communicator.receive_nothing(timeout=0.1)
    assert await database_sync_to_async(row_counts)() == before


@pytest.mark.parametrize("value", ["²", "\u0663", "-1", "abc", "1.5", "9" * 19])
async def test_it_answers_a_malformed_last_sequence_with_an_error_frame_and_closes(
    value: str, owner_session: str, conversation: Conversation, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    path = conversation_path(conversation.id) + "?" + urlencode({"last_sequence": value})
    communicator = sockets(path, owner_headers(owner_session))

    assert await communicator.connect(timeout=CLOSE_TIMEOUT) == (True, None)
    await expect_error_frame(communicator, "invalid_last_sequence")
    await expect_close(communicator, 4400)


# --- Frames ------------------------------------------------------------------------------


INVALID_FRAMES = [
    pytest.param({"text": "hello there"}, "invalid_frame", id="not-json"),
    pytest.param({"text": ""}, "invalid_frame", id="empty-text"),
    pytest.param({"text": '[{"type": "cancel_agent"}]'}, "invalid_frame", id="json-array"),
    pytest.param({"text": '"cancel_agent"'}, "invalid_frame", id="json-string"),
    pytest.param({"text": "null"}, "invalid_frame", id="json-null"),
    pytest.param({"data": b'{"type": "cancel_agent"}'}, "invalid_frame", id="binary"),
    pytest.param({"text": '{"type": "shout"}'}, "unknown_frame_type", id="unknown-type"),
    pytest.param({"text": '{"text": "hi"}'}, "unknown_frame_type", id="missing-type"),
    pytest.param({"text": '{"type": 3}'}, "unknown_frame_type", id="type-not-a-string"),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "text": "hi"})}, "invalid_frame", id="missing-request-id"
    ),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "request_id": REQUEST_ID})}, "invalid_frame", id="missing-text"
    ),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "request_id": REQUEST_ID, "text": "hi", "model": "x"})},
        "invalid_frame",
        id="extra-field",
    ),
    pytest.param({"text": json.dumps({"type": "cancel_agent", "force": True})}, "invalid_frame", id="extra-on-cancel"),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "request_id": REQUEST_ID, "text": 42})},
        "invalid_frame",
        id="text-not-a-string",
    ),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "request_id": 7, "text": "hi"})},
        "invalid_frame",
        id="request-id-not-a-string",
    ),
    pytest.param(
        {"text": json.dumps({"type": "email_consent_response", "critical_point_id": "cp-1", "consent": "yes"})},
        "invalid_frame",
        id="consent-not-a-bool",
    ),
    pytest.param(
        {"text": json.dumps({"type": "email_consent_response", "critical_point_id": "cp-1", "consent": 1})},
        "invalid_frame",
        id="consent-a-number",
    ),
    pytest.param(
        {"text": json.dumps({"type": "critical_point_response", "critical_point_id": "cp-1", "response": None})},
        "invalid_frame",
        id="response-null",
    ),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "request_id": "not-a-uuid", "text": "hi"})},
        "invalid_frame",
        id="request-id-not-a-uuid",
    ),
    pytest.param(
        {
            "text": json.dumps(
                {"type": "user_message", "request_id": "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz", "text": "hi"}
            )
        },
        "invalid_frame",
        id="request-id-uuid-shaped",
    ),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "request_id": "", "text": "hi"})},
        "invalid_frame",
        id="request-id-empty",
    ),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "request_id": REQUEST_ID, "text": "x" * MAX_FRAME_BYTES})},
        "frame_too_large",
        id="over-256-kib",
    ),
    pytest.param({"text": "[" * (MAX_FRAME_BYTES + 1)}, "frame_too_large", id="over-256-kib-not-json"),
    pytest.param({"text": "[" * 100_000}, "invalid_frame", id="nested-too-deeply"),
    pytest.param({"text": '{"type": "cancel_agent", "x": ' + "[" * 100_000}, "invalid_frame", id="nested-in-a-field"),
    pytest.param(
        {"text": json.dumps({"type": "user_message", "request_id": REQUEST_ID, "text": "\ud800"})},
        "invalid_frame",
        id="lone-surrogate-escaped",
    ),
    pytest.param(
        {"text": '{"type": "user_message", "request_id": "' + REQUEST_ID + '", "text": "a\udfffb"}'},
        "invalid_frame",
        id="lone-surrogate-raw",
    ),
    pytest.param(
        {"text": json.dumps({"type": "critical_point_response", "critical_point_id": "\udbff", "response": "ok"})},
        "invalid_frame",
        id="lone-surrogate-in-an-id",
    ),
    pytest.param({"text": '{"type": "cancel_agent", "\\ud800": 1}'}, "invalid_frame", id="lone-surrogate-field-name"),
    pytest.param(
        {"text": '{"type": "user_message", "request_id": "' + REQUEST_ID + '", "text": NaN}'},
        "invalid_frame",
        id="nan",
    ),
    pytest.param(
        {
            "text": json.dumps(
                {"type": "user_message", "request_id": REQUEST_ID, "text": "é" * (MAX_FRAME_BYTES // 2)},
                ensure_ascii=False,
            )
        },
        "frame_too_large",
        id="over-256-kib-in-utf8-bytes",
    ),
]


@pytest.mark.parametrize(("frame", "code"), INVALID_FRAMES)
async def test_it_answers_an_invalid_frame_with_an_error_frame_and_stores_nothing(
    frame: dict[str, Any],
    code: str,
    owner_session: str,
    conversation: Conversation,
    sockets: Callable[..., WebsocketCommunicator],
) -> None:
    communicator = await open_socket(sockets, conversation_path(conversation.id), owner_headers(owner_session))
    before = await database_sync_to_async(row_counts)()

    await send_frame(communicator, **frame)

    await expect_error_frame(communicator, code)
    await expect_still_open(communicator)
    assert await database_sync_to_async(row_counts)() == before


async def test_it_keeps_answering_after_many_invalid_frames_in_a_row(
    owner_session: str, conversation: Conversation, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    communicator = await open_socket(sockets, conversation_path(conversation.id), owner_headers(owner_session))
    before = await database_sync_to_async(row_counts)()

    for param in INVALID_FRAMES:
        frame, code = cast(tuple[dict[str, Any], str], param.values)
        await send_frame(communicator, **frame)
        await expect_error_frame(communicator, code)

    await expect_still_open(communicator)
    assert await database_sync_to_async(row_counts)() == before
    assert await database_sync_to_async(Conversation.objects.filter(id=conversation.id).exists)()
