"""The Tasks socket (`/ws/tasks/`), in process, against the real ASGI application.

Sessions come from a real sign-in; tasks and runs change through the API and the services
the owner and beat use, committing in another thread, so each notice reaches the socket
through the real channel layer.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from conversations.models import Conversation
from flarebot.asgi import application
from tasks import runs
from tests.conversations.test_consumers import (
    CLOSE_TIMEOUT,
    ORIGIN,
    expect_close,
    expect_refused,
    open_socket,
    owner_headers,
    session_key_of,
    wrong_origin,
)
from tests.tasks.conftest import body, create, detail, edit, send

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/ws/tasks/"
CHANGED = {"type": "tasks_changed"}


@pytest.fixture
async def sockets() -> AsyncIterator[Callable[..., WebsocketCommunicator]]:
    """Make communicators on the real application and disconnect them all afterwards."""
    made: list[WebsocketCommunicator] = []

    def make(path: str, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
        made.append(WebsocketCommunicator(application, path, headers=headers))
        return made[-1]

    yield make
    for communicator in made:
        if not communicator.future.done():
            await communicator.disconnect(timeout=CLOSE_TIMEOUT)


async def changed(socket: WebsocketCommunicator) -> None:
    """The socket says the tasks changed (once or more: one write may change a task and its runs), and nothing else."""
    assert json.loads(await socket.receive_from(timeout=CLOSE_TIMEOUT)) == CHANGED
    while not await socket.receive_nothing(timeout=0.2):
        assert json.loads(await socket.receive_from()) == CHANGED


async def test_it_tells_the_page_when_a_task_or_a_run_changed(
    owner_client: Client, conversation: Conversation, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    socket = await open_socket(sockets, PATH, owner_headers(session_key_of(owner_client)))

    task = await sync_to_async(create)(owner_client, body(conversation))
    await changed(socket)
    await sync_to_async(runs.run_now)(task_id=uuid.UUID(task["id"]), request_id=uuid.uuid4())
    await changed(socket)
    response = await sync_to_async(send)(owner_client, "put", detail(task["id"]), edit(task, name="Renamed"))
    assert response.status_code == 200, response.content
    await changed(socket)
    response = await sync_to_async(send)(owner_client, "delete", f"{detail(task['id'])}?expected_version=2")
    assert response.status_code == 204, response.content
    await changed(socket)


async def test_it_refuses_a_foreign_origin_and_a_missing_session(
    owner_client: Client, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    await expect_refused(sockets(PATH, wrong_origin(session_key_of(owner_client))), 4003)
    await expect_refused(sockets(PATH, [(b"origin", ORIGIN)]), 4001)


async def test_it_closes_with_4001_when_its_session_signs_out(
    owner_client: Client, sockets: Callable[..., WebsocketCommunicator]
) -> None:
    socket = await open_socket(sockets, PATH, owner_headers(session_key_of(owner_client)))

    response = await sync_to_async(owner_client.post)("/logout/")

    assert response.status_code == 302
    await expect_close(socket, 4001)
