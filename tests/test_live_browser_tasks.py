"""Browser tasks as the owner lives them: real daphne, Celery workers and beat, real Chromium in the worker.

The owner chats over real sockets; the chat model and the task's model are the loopback
provider's script; the worker's Chromium reaches the fixture shop of this test process
through `FLAREBOT_NETWORK_ALLOW`. Every wait is a poll with a deadline.
"""

from __future__ import annotations

import os
import socket as socket_module
from collections.abc import Iterator
from typing import Any

import pytest

from conversations.models import BrowserTask
from flarebot.core.stack import Stack, process_specs
from tests.support.browser_tasks import page_sent, step, task_requests
from tests.support.fake_providers import Call, FakeProviders, Text
from tests.support.live import LiveStack
from tests.support.live_clients import LiveSocket, OwnerClient, event_frames, message_text
from tests.support.web_fixtures import FixtureWeb, fixture_web_start
from tools.models import BrowserLease

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
]

TASK_SECONDS = 60.0
PROPOSAL_STEPS = ("browser_task.proposed",)


@pytest.fixture
def web() -> Iterator[FixtureWeb]:
    server = fixture_web_start()
    server.reset()
    yield server
    server.reset()


def event_of(socket: LiveSocket, kind: str, **limits: Any) -> dict[str, Any]:
    [*_, received] = socket.read_until_event((kind,), timeout=limits.get("timeout", TASK_SECONDS))
    return received.frame


def propose_in_chat(socket: LiveSocket, fake_providers: FakeProviders, web: FixtureWeb) -> str:
    """The chat model proposes the shop task in a real turn; return the proposal id."""
    proposal = {"goal": "Buy one blue kettle.", "start_url": web.url("/shop"), "restrictions": ["At most 30 EUR."]}
    fake_providers.script([Call("toolu_propose", "browser_task_propose", proposal)], [Text("Check and press Start.")])
    socket.ask("Buy me the blue kettle, at most 30 EUR.")
    proposed = [f for f in event_frames(socket.received) if f["event"] == "browser_task.proposed"]
    assert len(proposed) == 1
    assert proposed[0]["data"] == {
        "proposal_id": proposed[0]["data"]["proposal_id"],
        **proposal,
        "corrects_task_id": None,
        "carried_restrictions": [],
    }
    return str(proposed[0]["data"]["proposal_id"])


def reply(socket: LiveSocket, point: dict[str, Any], text: str, *, approve: bool | None = None) -> None:
    frame = {"type": "critical_point_response", "critical_point_id": point["critical_point_id"], "response": text}
    if approve is not None:
        frame["approve"] = approve
    socket.send(frame)


def pause_before_place_order(socket: LiveSocket, fake_providers: FakeProviders, proposal_id: str) -> dict[str, Any]:
    """Start the shop task: "Add to cart" sends a POST, held and approved; then "Place order" is held."""
    fake_providers.script(step("click", element=1))
    socket.send({"type": "browser_task_confirm", "proposal_id": proposal_id})
    event_of(socket, "browser_task.started")
    added = event_of(socket, "critical_point.opened")["data"]
    assert [r["path"] for r in added["action"]["requests"]] == ["/shop/cart/add"]
    fake_providers.script(
        step("click", element=1, critical_point_id=added["critical_point_id"]),
        step("click", element=2),
        step("click", element=1),
    )
    reply(socket, added, "Approved.", approve=True)
    return event_of(socket, "critical_point.opened")["data"]


def test_a_confirmed_task_pauses_before_place_order_and_only_an_approval_places_it_once(
    live_owner: OwnerClient, anthropic_key: None, fake_providers: FakeProviders, web: FixtureWeb
) -> None:
    conversation_id = live_owner.create_conversation("Kettle")
    with live_owner.socket(conversation_id) as socket:
        proposal_id = propose_in_chat(socket, fake_providers, web)
        assert not BrowserTask.objects.exists()  # nothing ran without the owner's Start
        point = pause_before_place_order(socket, fake_providers, proposal_id)
        assert (point["kind"], point["action"]["name"]) == ("confirm", "click")
        assert web.orders == []
        assert "/shop/order" not in web.paths()
        fake_providers.script(
            step("click", element=1, critical_point_id=point["critical_point_id"]),
            step("finish", outcome="completed", summary="The page confirmed order A-1001."),
        )
        reply(socket, point, "Yes", approve=True)
        resolved = event_of(socket, "critical_point.resolved")
        finished = event_of(socket, "browser_task.finished")
        socket.read_until_event(("turn.completed",), timeout=TASK_SECONDS)
        reply(socket, point, "Yes")
        [stale] = socket.read_until(lambda r: r.frame["type"] == "error")
        live = event_frames(socket.received)

    assert stale.frame["code"] == "stale_critical_point"
    assert resolved["data"]["critical_point_id"] == point["critical_point_id"]
    assert finished["data"]["outcome"] == "completed"
    assert web.orders == [["Blue kettle"]]
    transcript = live_owner.messages(conversation_id)
    assert message_text(transcript["messages"][-1]) == "**Browser task completed.** The page confirmed order A-1001."
    listed = live_owner.api("GET", f"/api/conversations/{conversation_id}/browser-tasks/").json()
    assert [t["status"] for t in listed["tasks"]] == ["completed"]
    # A client reconnecting from the start sees every proposal, checkpoint and outcome exactly once.
    with live_owner.socket(conversation_id, last_sequence=0) as again:
        again.read_until(lambda r: r.frame.get("sequence") == transcript["last_sequence"])
        replayed = event_frames(again.received)
    assert replayed == live
    kinds = [f["event"] for f in replayed]
    for kind in ("browser_task.proposed", "browser_task.started", "browser_task.finished"):
        assert kinds.count(kind) == 1
    assert kinds.count("critical_point.opened") == 2  # the cart's POST, then the order


def restart_everything(live: LiveStack) -> None:
    """Stop every process, then start them all again."""
    names = ("web", "worker", "beat")
    since = {name: live.log_size(name) for name in names}
    live.stack.stop()
    live.stack.start()
    for name in names:
        live.wait_ready(name, since=since[name])


def test_a_pause_survives_a_full_restart_and_resumes_from_the_checkpoint_asking_again(
    live_stack: LiveStack,
    live_owner: OwnerClient,
    anthropic_key: None,
    fake_providers: FakeProviders,
    web: FixtureWeb,
) -> None:
    conversation_id = live_owner.create_conversation("Kettle after a restart")
    with live_owner.socket(conversation_id) as socket:
        point = pause_before_place_order(socket, fake_providers, propose_in_chat(socket, fake_providers, web))
        last = event_frames(socket.received)[-1]["sequence"]
    kept = BrowserTask.objects.get().context_lease_id
    assert kept is not None

    restart_everything(live_stack)

    assert BrowserLease.objects.get(id=kept).state == "closed"  # the kept context went with its worker
    fake_providers.script(step("click", element=1, critical_point_id=point["critical_point_id"]))
    with live_owner.socket(conversation_id, last_sequence=last) as socket:
        reply(socket, point, "Yes", approve=True)
        event_of(socket, "critical_point.resolved")
        again = event_of(socket, "critical_point.opened")["data"]
        assert web.orders == []
        fake_providers.script(
            step("click", element=1, critical_point_id=again["critical_point_id"]),
            step("finish", outcome="completed", summary="Order A-1001 confirmed."),
        )
        reply(socket, again, "Yes", approve=True)
        event_of(socket, "browser_task.finished")

    assert again["critical_point_id"] != point["critical_point_id"]
    assert again["action"] == point["action"]
    assert "restored from the task's checkpoint" in page_sent(task_requests(fake_providers)[-3])
    assert web.orders == [["Blue kettle"]]
    assert web.paths().count("/shop/cart/add") == 1


def second_worker(live_stack: LiveStack) -> Stack:
    """Start another worker process on the same Redis and database (the caller stops it)."""
    name = f"test-2-{os.getpid()}@{socket_module.gethostname()}"
    [_, worker, _] = process_specs(bind="127.0.0.1", port=1, worker_name=name, worker_threads=8)
    worker.name = "worker-2"
    stack = Stack(specs=[worker], env=live_stack.stack.env, log_dir=live_stack.log_dir, cwd=live_stack.stack.cwd)
    since = len(stack.log_text("worker-2"))
    stack.start()
    stack.wait_for(lambda: " ready." in stack.log_text("worker-2")[since:], timeout=60, what="the second worker")
    return stack


def test_a_reply_handled_by_another_worker_restores_only_after_the_old_context_closed(
    live_stack: LiveStack,
    live_owner: OwnerClient,
    anthropic_key: None,
    fake_providers: FakeProviders,
    web: FixtureWeb,
) -> None:
    conversation_id = live_owner.create_conversation("Kettle on another worker")
    with live_owner.socket(conversation_id) as socket:
        point = pause_before_place_order(socket, fake_providers, propose_in_chat(socket, fake_providers, web))
        paused = BrowserTask.objects.get()
        assert paused.context_lease_id is not None
        first_holder = BrowserLease.objects.get(id=paused.context_lease_id).holder
        # The worker that paused goes away; another one takes the reply.
        since = live_stack.log_size("worker")
        live_stack.stack.stop(only="worker")
        stack = second_worker(live_stack)
        try:
            fake_providers.script(step("click", element=1, critical_point_id=point["critical_point_id"]))
            reply(socket, point, "Yes", approve=True)
            again = event_of(socket, "critical_point.opened")["data"]
            fake_providers.script(
                step("click", element=1, critical_point_id=again["critical_point_id"]),
                step("finish", outcome="completed", summary="Order A-1001 confirmed."),
            )
            reply(socket, again, "Yes", approve=True)
            event_of(socket, "browser_task.finished")
        finally:
            stack.stop()
            live_stack.stack.start(only="worker")
            live_stack.wait_ready("worker", since=since)

    task = BrowserTask.objects.get()
    assert task.context_lease_id is not None
    old, new = BrowserLease.objects.get(id=paused.context_lease_id), BrowserLease.objects.get(id=task.context_lease_id)
    assert new.holder != first_holder
    assert new.holder.split(":")[1] == str(stack.processes["worker-2"].pid)
    assert old.closed_at is not None
    assert old.closed_at <= new.created_at
    assert web.orders == [["Blue kettle"]]


def test_cancel_over_http_stops_a_running_task(
    live_owner: OwnerClient, anthropic_key: None, fake_providers: FakeProviders, web: FixtureWeb
) -> None:
    conversation_id = live_owner.create_conversation("Cancelled kettle")
    with live_owner.socket(conversation_id) as socket:
        proposal_id = propose_in_chat(socket, fake_providers, web)
        fake_providers.script(step("wait", seconds=10), step("click", element=1))
        socket.send({"type": "browser_task_confirm", "proposal_id": proposal_id})
        socket.read_until(lambda r: r.frame.get("event") == "activity.updated" and "Waiting 10 s" in str(r.frame))
        response = live_owner.api("DELETE", "/api/agent/", json={"session_id": conversation_id})
        finished = event_of(socket, "browser_task.finished")

    assert response.status_code == 202
    assert finished["data"]["outcome"] == "cancelled"
    assert web.cart == []
    gone = live_owner.api("DELETE", "/api/agent/", json={"session_id": conversation_id})
    assert gone.status_code == 404
