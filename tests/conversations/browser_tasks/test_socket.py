"""The browser task frames of the conversation socket, in process, against the real ASGI application."""

from __future__ import annotations

import json
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from conversations.events import browser_input_group, conversation_group
from conversations.models import BrowserTask, BrowserTaskProposal, CriticalPoint, Event
from conversations.services import conversation_create
from flarebot.core.times import iso
from tests.conversations.browser_tasks.test_services import propose
from tests.conversations.test_consumers import (
    conversation_path,
    expect_error_frame,
    open_socket,
    owner_headers,
    owner_session,
    send_frame,
    sockets,
)
from tests.support.browser_tasks import paused_task

__all__ = ["owner_session", "sockets"]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


orm = database_sync_to_async


@pytest.fixture
def conversation(owner):
    return conversation_create(name="Shopping").id


async def connect(sockets, owner_session, conversation_id, last_sequence=None):
    path = conversation_path(conversation_id) + (f"?last_sequence={last_sequence}" if last_sequence is not None else "")
    stored = await orm(Event.objects.filter(conversation_id=conversation_id, sequence__gt=last_sequence or 0).count)()
    socket = await open_socket(sockets, path, owner_headers(owner_session))
    socket.replay_at_least = stored  # the events stored before it opened: its replay holds them all
    return socket


async def send(socket, **frame):
    await send_frame(socket, text=json.dumps(frame))


async def next_frames(socket, count):
    return [json.loads(await socket.receive_from(timeout=30)) for _ in range(count)]


async def replayed(socket):
    """The socket's replay: every event stored before it opened (however long a loaded machine
    takes to read them), and whatever else arrives without a pause."""
    frames = [json.loads(await socket.receive_from(timeout=30)) for _ in range(socket.replay_at_least)]
    while not await socket.receive_nothing(timeout=0.2):
        frames.append(json.loads(await socket.receive_from(timeout=30)))
    return frames


async def test_confirm_starts_the_task_and_dismiss_refuses_it_afterwards(sockets, owner_session, conversation):
    proposal = await orm(propose)(conversation)
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(socket, type="browser_task_confirm", proposal_id=str(proposal.id))
    started, card = await next_frames(socket, 2)

    task = await orm(BrowserTask.objects.get)()
    assert (started["event"], started["data"]["task_id"], started["turn_id"]) == (
        "browser_task.started",
        str(task.id),
        None,
    )
    assert card["event"] == "activity.updated"
    await send(socket, type="browser_task_dismiss", proposal_id=str(proposal.id))
    await expect_error_frame(socket, "proposal_started")
    await send(socket, type="browser_task_confirm", proposal_id=str(proposal.id))
    await expect_error_frame(socket, "proposal_started")
    assert await orm(BrowserTask.objects.count)() == 1


async def test_a_superseded_proposal_gets_an_error_frame(sockets, owner_session, conversation):
    old = await orm(propose)(conversation)
    await orm(propose)(conversation)
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(socket, type="browser_task_confirm", proposal_id=str(old.id))

    await expect_error_frame(socket, "proposal_superseded")
    assert not await orm(BrowserTask.objects.exists)()


async def test_dismiss_is_announced(sockets, owner_session, conversation):
    proposal = await orm(propose)(conversation)
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(socket, type="browser_task_dismiss", proposal_id=str(proposal.id))

    [dismissed] = await next_frames(socket, 1)
    assert (dismissed["event"], dismissed["data"]) == ("browser_task.dismissed", {"proposal_id": str(proposal.id)})
    assert (await orm(BrowserTaskProposal.objects.get)(id=proposal.id)).state == "dismissed"


async def test_an_answer_is_acknowledged_and_a_stale_or_unknown_one_refused(sockets, owner_session, conversation):
    task, point = await orm(paused_task)(conversation)
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(socket, type="critical_point_response", critical_point_id=str(point.id), response="The red one.")
    resolved, step, _card = await next_frames(socket, 3)
    await send(socket, type="critical_point_response", critical_point_id=str(point.id), response="The blue one.")
    await expect_error_frame(socket, "stale_critical_point")
    await send(socket, type="critical_point_response", critical_point_id=str(uuid.uuid4()), response="Yes")
    await expect_error_frame(socket, "unknown_critical_point")
    await send(socket, type="email_consent_response", critical_point_id="cp-1", consent=True)
    await expect_error_frame(socket, "unknown_critical_point")

    stored = await orm(CriticalPoint.objects.get)(id=point.id)
    assert resolved["event"] == "critical_point.resolved"
    assert resolved["data"] == {
        "task_id": str(task.id),
        "critical_point_id": str(point.id),
        "answer": {"response": "The red one.", "approve": None, "consent": None},
        "resolved_at": iso(stored.resolved_at),
    }
    assert step["event"] == "browser_task.step"
    assert (step["data"]["step"]["number"], step["data"]["step"]["outcome"]) == (1, "answered")
    assert stored.response == "The red one."


@pytest.mark.parametrize(
    ("kind", "frame", "code"),
    [
        ("email_consent", {"type": "critical_point_response", "response": "yes"}, "wrong_reply"),
        ("question", {"type": "email_consent_response", "consent": True}, "wrong_reply"),
        ("sign_in", {"type": "critical_point_response", "response": "I typed hunter2"}, "sign_in_continue_only"),
    ],
)
async def test_a_reply_of_the_wrong_kind_gets_an_error_frame_and_is_not_stored(
    sockets, owner_session, conversation, kind, frame, code
):
    _, point = await orm(paused_task)(conversation, kind=kind)
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(socket, **frame, critical_point_id=str(point.id))

    await expect_error_frame(socket, code)
    stored = await orm(CriticalPoint.objects.get)(id=point.id)
    assert (stored.state, stored.response, stored.consent) == ("open", "", None)


async def test_a_sign_in_continues_only_with_the_exact_continue(sockets, owner_session, conversation):
    _, point = await orm(paused_task)(conversation, kind="sign_in")
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(socket, type="critical_point_response", critical_point_id=str(point.id), response="continue")
    [resolved, _step, _card] = await next_frames(socket, 3)

    assert resolved["event"] == "critical_point.resolved"


async def test_cancel_agent_cancels_the_paused_task(sockets, owner_session, conversation):
    task, _ = await orm(paused_task)(conversation)
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(socket, type="cancel_agent")
    frames = await next_frames(socket, 4)

    assert [f["event"] for f in frames] == [
        "browser_task.finished",
        "activity.updated",
        "message.replaced",
        "turn.completed",
    ]
    assert frames[0]["data"]["outcome"] == "cancelled"
    assert (await orm(BrowserTask.objects.get)(id=task.id)).status == "cancelled"


async def test_a_reconnect_replays_every_proposal_checkpoint_and_outcome_exactly_once(
    sockets, owner_session, conversation
):
    await orm(paused_task)(conversation)
    first = await connect(sockets, owner_session, conversation)
    seen = await replayed(first)
    middle = seen[1]["sequence"]
    await send(first, type="cancel_agent")
    await next_frames(first, 4)

    again = await connect(sockets, owner_session, conversation, last_sequence=middle)
    rest = await replayed(again)

    kinds = [f["event"] for f in seen[:2] + rest]
    assert [f["sequence"] for f in seen[:2] + rest] == list(range(1, len(kinds) + 1))
    for kind in ("browser_task.proposed", "browser_task.started", "critical_point.opened", "browser_task.finished"):
        assert kinds.count(kind) == 1, kinds


async def test_live_view_frames_are_forwarded_without_a_sequence_and_never_replayed(
    sockets, owner_session, conversation
):
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)
    picture = {"type": "browser.frame", "task_id": "t", "image": "aGVsbG8=", "width": 1280, "height": 900}

    await get_channel_layer().group_send(conversation_group(conversation), picture)

    [frame] = await next_frames(socket, 1)
    assert frame == {"type": "frame", "task_id": "t", "image": "aGVsbG8=", "width": 1280, "height": 900}
    later = await connect(sockets, owner_session, conversation)
    assert await replayed(later) == []


async def test_browser_input_reaches_the_sign_in_page_only_while_its_point_is_open(
    sockets, owner_session, conversation
):
    task, point = await orm(paused_task)(conversation, kind="sign_in")
    layer = get_channel_layer()
    listener = await layer.new_channel()
    await layer.group_add(browser_input_group(task.id), listener)
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)
    typed = {"kind": "text", "text": "correct horse"}

    await send(socket, type="browser_input", task_id=str(task.id), critical_point_id=str(point.id), input=typed)
    delivered = await layer.receive(listener)

    assert delivered == {"type": "browser.input", "critical_point_id": str(point.id), "input": typed}
    await send(socket, type="critical_point_response", critical_point_id=str(point.id), response="continue")
    await next_frames(socket, 3)
    await send(socket, type="browser_input", task_id=str(task.id), critical_point_id=str(point.id), input=typed)
    await expect_error_frame(socket, "stale_critical_point")
    await layer.group_discard(browser_input_group(task.id), listener)


async def test_browser_input_for_a_question_is_refused(sockets, owner_session, conversation):
    task, point = await orm(paused_task)(conversation, kind="question")
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(
        socket,
        type="browser_input",
        task_id=str(task.id),
        critical_point_id=str(point.id),
        input={"kind": "key", "key": "Enter"},
    )

    await expect_error_frame(socket, "stale_critical_point")


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "browser_task_confirm"},
        {"type": "browser_task_confirm", "proposal_id": "p-1"},
        {"type": "browser_task_confirm", "proposal_id": str(uuid.uuid4()), "force": True},
        {"type": "browser_task_dismiss", "proposal_id": 7},
        {"type": "browser_input", "task_id": str(uuid.uuid4()), "critical_point_id": "x", "input": {"kind": "paste"}},
        {"type": "browser_input", "task_id": "t", "critical_point_id": "x", "input": {"kind": "key", "key": "Enter"}},
        {
            "type": "browser_input",
            "task_id": str(uuid.uuid4()),
            "critical_point_id": "x",
            "input": {"kind": "click", "x": 5000, "y": 1},
        },
        {
            "type": "browser_input",
            "task_id": str(uuid.uuid4()),
            "critical_point_id": "x",
            "input": {"kind": "text", "text": "s3cret-typed" * 30},
        },
        {"type": "browser_input", "task_id": str(uuid.uuid4()), "critical_point_id": "x", "input": "a"},
    ],
)
async def test_malformed_frames_get_an_error_frame_that_never_echoes_typed_text(
    sockets, owner_session, conversation, frame
):
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(socket, **frame)

    raw = await socket.receive_from(timeout=30)
    assert json.loads(raw)["code"] == "invalid_frame"
    assert "s3cret" not in raw


async def test_an_answer_in_seed_004s_shape_names_its_own_conversation_as_session_id(
    sockets, owner_session, conversation
):
    other = await orm(conversation_create)(name="Another")
    _, point = await orm(paused_task)(conversation)
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    for wrong in (str(other.id), "not-a-conversation", "{" + str(conversation) + "}"):
        await send(
            socket, type="critical_point_response", critical_point_id=str(point.id), response="Red.", session_id=wrong
        )
        await expect_error_frame(socket, "wrong_session")
    assert (await orm(CriticalPoint.objects.get)(id=point.id)).state == "open"  # nothing was sent

    await send(
        socket,
        type="critical_point_response",
        critical_point_id=str(point.id),
        response="The red one.",
        session_id=str(conversation).upper(),
    )
    resolved, _step, _card = await next_frames(socket, 3)

    assert resolved["event"] == "critical_point.resolved"
    assert (await orm(CriticalPoint.objects.get)(id=point.id)).response == "The red one."


async def test_an_email_consent_may_carry_session_id_too(sockets, owner_session, conversation):
    _, point = await orm(paused_task)(conversation, kind="email_consent")
    socket = await connect(sockets, owner_session, conversation)
    await replayed(socket)

    await send(
        socket,
        type="email_consent_response",
        critical_point_id=str(point.id),
        consent=False,
        session_id=str(conversation),
    )
    resolved, _step, _card = await next_frames(socket, 3)

    assert resolved["event"] == "critical_point.resolved"
