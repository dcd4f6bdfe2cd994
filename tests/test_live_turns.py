"""Turns as the owner lives them: real daphne, Celery worker and beat, real Redis and database.

The owner signs in over HTTP, sets a key through the settings API and chats over real
sockets; the worker's SDKs stream from the loopback providers of this test process, so
the provider's view (requests, timing, disconnects) can be compared with what reached the
socket. Every wait is a poll with a deadline.
"""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from django.apps import apps
from django.conf import settings

from conversations.instructions import DEFAULT_INSTRUCTIONS, system_prompt
from conversations.models import Event, ProviderKey, Turn
from flarebot.core.crypto import unseal
from flarebot.core.models import Installation
from tests.support.fake_providers import FakeProviders, HttpError, Recorded, Step, Text
from tests.support.live import LiveStack
from tests.support.live_clients import (
    LiveSocket,
    OwnerClient,
    delta_text,
    deltas,
    event_frames,
    message_text,
    sequences,
    shown_text,
)

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# A cancel is honoured far sooner than this on any machine, and far before the model's
# minute runs out: what the owner sees (the answer stops, the partial stays) is what counts.
CANCEL_DEADLINE = 20.0
# A killed worker's lease lasts 30 s and beat reconciles every 30 s: up to a minute, plus
# the worker's restart and the retried answer.
RECOVERY_SECONDS = 90.0
RECOVERY_LIMIT = 40.0  # seconds from a worker's SIGKILL until its turn continues elsewhere


def key_echoing_error(key: str) -> dict[str, Any]:
    """Return an authentication error body that quotes the key back, as some upstreams do."""
    return {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key: {key}"}}


def paced(chunks: list[str], delay: float) -> list[Step]:
    return [Text(chunk, delay=delay) for chunk in chunks]


def eventually(live: LiveStack, condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    live.stack.wait_for(condition, timeout=timeout, what=what)


def request_text(request: Recorded) -> list[tuple[str, str]]:
    """Return the (role, text) of each message a Messages API request carried."""
    return [
        (m["role"], "".join(c.get("text", "") for c in m["content"] if c["type"] == "text"))
        for m in request.body["messages"]
    ]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [event["event"] for event in events]


def test_it_streams_an_answer_to_the_socket_while_the_model_is_still_writing_it(
    live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    chunks = [f"Chunk {i:02d} of twenty. " for i in range(20)]
    fake_providers.script(paced(chunks, 0.05))
    conversation_id = live_owner.create_conversation()

    with live_owner.socket(conversation_id) as socket:
        result = socket.ask("Count to twenty, slowly.")

    [request] = fake_providers.requests
    events = result.events
    received_deltas = deltas(result.received)
    assert result.received[0].frame["type"] == "ack"
    assert kinds(events) == ["turn.queued", "turn.started"] + ["text.delta"] * len(received_deltas) + ["turn.completed"]
    assert all(event["turn_id"] == result.turn_id for event in events)
    assert [event["sequence"] for event in events] == list(range(1, len(events) + 1))
    assert result.text == "".join(chunks)
    # Several frames, each carrying only its new text, spread over the ~1 s the model took:
    # the first arrived long before the model wrote its last chunk.
    assert len(received_deltas) >= 5
    assert all(len(d.frame["data"]["text"]) < len(result.text) for d in received_deltas)
    assert received_deltas[0].at - request.started < 0.5
    assert received_deltas[-1].at - received_deltas[0].at > 0.5
    assert request.headers["x-api-key"] == anthropic_key
    transcript = live_owner.messages(conversation_id)
    assert [(m["role"], message_text(m), m["turn_id"]) for m in transcript["messages"]] == [
        ("user", "Count to twenty, slowly.", result.turn_id),
        ("assistant", "".join(chunks), result.turn_id),
    ]
    assert transcript["last_sequence"] == events[-1]["sequence"]


def test_it_keeps_two_conversations_streaming_at_once_on_their_own_sockets(
    live_stack: LiveStack, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    answers = [
        [f"Alpha says {i}. " for i in range(20)],
        [f"Bravo answers {i}! " for i in range(20)],
    ]
    fake_providers.script(*(paced(chunks, 0.05) for chunks in answers))
    questions = {"first": "Question from the first conversation", "second": "Question from the second one"}
    conversations = {name: live_owner.create_conversation(name) for name in questions}
    sockets = {name: live_owner.socket(conversations[name]) for name in questions}

    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {name: pool.submit(sockets[name].ask, questions[name]) for name in questions}
            results = {name: future.result() for name, future in futures.items()}
    finally:
        for socket in sockets.values():
            socket.close()

    requests = list(fake_providers.requests)
    assert len(requests) == 2
    eventually(live_stack, lambda: all(r.ended for r in requests), timeout=30, what="the provider to finish")
    # Both answers were being written at the same time.
    earlier, later = sorted(requests, key=lambda r: r.started)
    assert earlier.ended is not None
    assert later.started < earlier.ended - 0.5
    for name, result in results.items():
        # Answers are handed out in request order: the request that carried this
        # conversation's question got the answer at its index.
        [index] = [i for i, r in enumerate(requests) if request_text(r) == [("user", questions[name])]]
        expected = "".join(answers[index])
        transcript = live_owner.messages(conversations[name])
        [assistant] = [m for m in transcript["messages"] if m["role"] == "assistant"]
        events = result.events
        assert result.terminal["event"] == "turn.completed"
        assert result.text == expected
        assert all(event["turn_id"] == result.turn_id for event in events)
        assert {d.frame["data"]["message_id"] for d in deltas(result.received)} == {assistant["id"]}
        assert [event["sequence"] for event in events] == list(range(1, len(events) + 1))
        assert message_text(assistant) == expected
        assert transcript["last_sequence"] == events[-1]["sequence"]
    assert results["first"].text != results["second"].text
    assert results["first"].turn_id != results["second"].turn_id


def test_it_resumes_a_turn_on_a_reconnected_socket_with_no_gap_and_no_duplicate(
    live_stack: LiveStack, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    chunks = [f"Part {i:02d} of the tale. " for i in range(30)]
    fake_providers.script(paced(chunks, 0.05))
    conversation_id = live_owner.create_conversation()

    first = live_owner.socket(conversation_id)
    first.send_message("Tell me the tale in parts.")
    first.read_deltas(3)
    first.close()
    last_seen = sequences(first.received)[-1]
    reconnected_at = time.monotonic()
    with live_owner.socket(conversation_id, last_sequence=last_seen) as second:
        second.read_until_event(("turn.completed",))
    with live_owner.socket(conversation_id, last_sequence=0) as fresh:
        fresh.read_until_event(("turn.completed",))

    [request] = fake_providers.requests
    eventually(live_stack, lambda: request.ended is not None, timeout=30, what="the provider to finish")
    assert request.ended is not None
    assert request.ended > reconnected_at  # the socket came back while the model was writing
    before, after = sequences(first.received), sequences(second.received)
    assert after[0] == last_seen + 1
    assert before + after == list(range(1, after[-1] + 1))
    assert delta_text(first.received) + delta_text(second.received) == "".join(chunks)
    assert event_frames(fresh.received) == event_frames(first.received) + event_frames(second.received)
    assert live_owner.messages(conversation_id)["last_sequence"] == after[-1]


def cancels_a_slow_answer_and_answers_the_next_message(
    live_stack: LiveStack,
    live_owner: OwnerClient,
    fake_providers: FakeProviders,
    cancel: Callable[[LiveSocket, str], float],
) -> None:
    """Cancel a streaming turn with `cancel(socket, conversation_id)` and check what the owner sees."""
    chunks = [f"word{i:03d} " for i in range(300)]  # a minute if nobody stopped it
    fake_providers.script(paced(chunks, 0.2), [Text("Here is a short one.")])
    conversation_id = live_owner.create_conversation()

    with live_owner.socket(conversation_id) as socket:
        socket.send_message("Tell me a long story.")
        [ack] = socket.read_until(lambda r: r.frame["type"] == "ack")
        socket.read_deltas(3)
        sent_at = cancel(socket, conversation_id)
        socket.read_until_event(("turn.cancelled", "turn.completed", "turn.failed"), deadline=sent_at + CANCEL_DEADLINE)
        partial = delta_text(socket.received)
        cancelled = event_frames(socket.received)[-1]
        following = socket.ask("A short one, then.")

    assert cancelled == {
        "type": "event",
        "sequence": cancelled["sequence"],
        "event": "turn.cancelled",
        "turn_id": ack.frame["turn_id"],
        "data": {},
    }
    assert partial
    assert "".join(chunks).startswith(partial)
    assert len(partial) < len("".join(chunks)) / 2
    stopped, answered = fake_providers.requests
    eventually(live_stack, lambda: stopped.disconnected, timeout=CANCEL_DEADLINE, what="the provider to see it go")
    assert stopped.ended is not None
    assert stopped.ended - sent_at < CANCEL_DEADLINE
    assert following.terminal["event"] == "turn.completed"
    assert following.text == "Here is a short one."
    assert request_text(answered) == [
        ("user", "Tell me a long story."),
        ("assistant", partial),
        ("user", "A short one, then."),
    ]
    transcript = live_owner.messages(conversation_id)
    assert [(m["role"], message_text(m)) for m in transcript["messages"]] == [
        ("user", "Tell me a long story."),
        ("assistant", partial),
        ("user", "A short one, then."),
        ("assistant", "Here is a short one."),
    ]
    assert transcript["last_sequence"] == following.terminal["sequence"]


def test_it_cancels_a_streaming_turn_from_the_socket_and_keeps_the_partial_answer(
    live_stack: LiveStack, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    cancels_a_slow_answer_and_answers_the_next_message(
        live_stack, live_owner, fake_providers, lambda socket, _: socket.cancel()
    )


def test_it_cancels_a_streaming_turn_over_http_and_keeps_the_partial_answer(
    live_stack: LiveStack, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    def cancel_over_http(socket: LiveSocket, conversation_id: str) -> float:
        sent_at = time.monotonic()
        response = live_owner.api("POST", f"/api/conversations/{conversation_id}/cancel/")
        assert response.status_code == 202, response.text
        assert response.json()["turn_id"] == socket.received[0].frame["turn_id"]
        return sent_at

    cancels_a_slow_answer_and_answers_the_next_message(live_stack, live_owner, fake_providers, cancel_over_http)


def test_it_fails_a_turn_whose_key_is_rejected_with_a_safe_message_and_answers_the_next(
    live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    echoed = key_echoing_error(anthropic_key)
    fake_providers.script([HttpError(401, echoed)], [Text("Working again.")])
    conversation_id = live_owner.create_conversation()

    with live_owner.socket(conversation_id) as socket:
        failed = socket.ask("Hello?")
        recovered = socket.ask("Hello again?")

    rejected = fake_providers.requests[0]
    assert rejected.headers["x-api-key"] == anthropic_key
    assert kinds(failed.events) == ["turn.queued", "turn.started", "turn.failed"]
    assert failed.terminal["data"]["code"] == "provider_auth"
    message = failed.terminal["data"]["message"]
    assert "key" in message
    assert "Settings" in message
    assert len(message) < 200
    assert anthropic_key not in json.dumps([r.frame for r in failed.received])
    assert "invalid x-api-key" not in message
    assert recovered.terminal["event"] == "turn.completed"
    assert recovered.text == "Working again."
    transcript = live_owner.messages(conversation_id)
    # The failed turn left no answer text behind.
    assert [(m["role"], message_text(m)) for m in transcript["messages"] if m["role"] == "user" or m["parts"]] == [
        ("user", "Hello?"),
        ("user", "Hello again?"),
        ("assistant", "Working again."),
    ]


# SLOW (15-25 s, by design): a killed worker's lease must run out (15 s) and beat's
# reconciliation (every 5 s) must find it, with nobody nudging it.
@pytest.mark.database
def test_it_finishes_a_turn_whose_worker_was_killed_once_beat_requeues_it(
    live_stack: LiveStack, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    """Slow: SIGKILL the worker mid-answer; beat requeues the turn once its lease expires."""
    long_answer = [f"Line {i:03d} of the saga. " for i in range(400)]  # 40 s if never cut off
    fake_providers.script(paced(long_answer, 0.1), [Text("And that is how the saga ends.")])
    conversation_id = live_owner.create_conversation()
    first = live_owner.socket(conversation_id)
    first.send_message("Tell me the saga.")
    first.read_deltas(3)
    worker_log, beat_log = live_stack.log_size("worker"), live_stack.log_size("beat")

    live_stack.stack.signal("worker", signal.SIGKILL)
    killed_at = time.monotonic()
    try:
        live_stack.stack.processes["worker"].wait(timeout=10)
        live_stack.stack.start(only="worker")
        live_stack.wait_ready("worker", since=worker_log)
        first.close()
        orphaned = Turn.objects.get(conversation_id=conversation_id)
        last_seen = sequences(first.received)[-1]
        with live_owner.socket(conversation_id, last_sequence=last_seen) as second:
            # The contract: the turn continues within 40 s of the kill.
            try:
                second.read_until_event(
                    ("turn.started",), timeout=max(0.0, RECOVERY_LIMIT - (time.monotonic() - killed_at))
                )
            except AssertionError as stuck:
                raise AssertionError(
                    recovery_timeline(live_stack, orphaned.id, worker_log=worker_log, beat_log=beat_log)
                ) from stuck
            second.read_until_event(("turn.completed", "turn.failed", "turn.cancelled"), timeout=RECOVERY_SECONDS)
    finally:
        if live_stack.stack.processes["worker"].poll() is not None:
            since = live_stack.log_size("worker")
            live_stack.stack.start(only="worker")
            live_stack.wait_ready("worker", since=since)

    events = event_frames(first.received) + event_frames(second.received)
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert sequences(second.received)[0] == last_seen + 1
    assert [e["data"]["attempt"] for e in events if e["event"] == "turn.started"] == [1, 2]
    # From the second attempt's start on, only its events: the retried step starts over,
    # replacing the cut-off text, and nothing of the dead attempt follows.
    retry_events = events[next(i for i, e in enumerate(events) if e["data"] == {"attempt": 2}) :]
    assert retry_events[0] in event_frames(second.received)
    assert kinds(retry_events) == ["turn.started", "message.replaced", "text.delta", "turn.completed"]
    assert retry_events[1]["data"] == {"parts": []}
    assert (orphaned.status, orphaned.attempts) == ("running", 1)
    assert orphaned.lease_expires_at is not None
    # Beat, not the restarted worker's start-up sweep, requeued it, after the lease ran out.
    restarted = Event.objects.get(conversation_id=conversation_id, kind="turn.started", data__attempt=2)
    assert restarted.created_at > orphaned.lease_expires_at
    assert "Sending due task conversations-reconcile-turns" in live_stack.log_since("beat", beat_log)
    # Never two attempts at once: the dead worker's stream was over before the retry began.
    cut_off, retried = fake_providers.requests
    assert cut_off.disconnected
    assert cut_off.ended is not None
    assert cut_off.ended <= retried.started
    assert request_text(retried) == [("user", "Tell me the saga.")]
    turn = Turn.objects.get(id=orphaned.id)
    assert (turn.status, turn.attempts) == ("completed", 2)
    assert "".join(long_answer).startswith(delta_text(first.received))
    transcript = live_owner.messages(conversation_id)
    [assistant] = [m for m in transcript["messages"] if m["role"] == "assistant"]
    assert shown_text(events) == message_text(assistant) == "And that is how the saga ends."
    assert transcript["last_sequence"] == events[-1]["sequence"]


def recovery_timeline(live_stack: LiveStack, turn_id: uuid.UUID, *, worker_log: int, beat_log: int) -> str:
    """What a failed recovery looked like: the turn's row now, and what worker and beat did about it."""
    turn = Turn.objects.get(id=turn_id)
    wanted = ("reconcile", "ready", str(turn_id), "expired", "revoked", "Traceback", "Error")

    def lines(name: str, offset: int) -> str:
        return "\n".join(
            line for line in live_stack.log_since(name, offset).splitlines() if any(w in line for w in wanted)
        )[-6000:]

    return (
        f"the turn did not continue within {RECOVERY_LIMIT:.0f} s of the kill; now "
        f"status={turn.status} attempts={turn.attempts} lease_expires_at={turn.lease_expires_at}\n"
        f"--- worker\n{lines('worker', worker_log)}\n--- beat\n{lines('beat', beat_log)}"
    )


def test_it_keeps_the_history_and_answers_again_after_every_process_restarts(
    live_stack: LiveStack, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    fake_providers.script([Text("Before the restart.")], [Text("After the restart.")])
    conversation_id = live_owner.create_conversation()
    with live_owner.socket(conversation_id) as socket:
        before_turn = socket.ask("Are you there?")
    before = live_owner.messages(conversation_id)

    for name in ("web", "worker", "beat"):
        live_stack.restart(name)

    after = live_owner.messages(conversation_id)
    with live_owner.socket(conversation_id, last_sequence=after["last_sequence"]) as socket:
        after_turn = socket.ask("Still there?")

    assert before_turn.text == "Before the restart."
    assert after == before
    assert after["last_sequence"] == before_turn.terminal["sequence"]
    assert after_turn.terminal["event"] == "turn.completed"
    assert after_turn.events[0]["sequence"] == after["last_sequence"] + 1
    assert request_text(fake_providers.requests[-1]) == [
        ("user", "Are you there?"),
        ("assistant", "Before the restart."),
        ("user", "Still there?"),
    ]
    final = live_owner.messages(conversation_id)
    assert [(m["role"], message_text(m)) for m in final["messages"]] == [
        ("user", "Are you there?"),
        ("assistant", "Before the restart."),
        ("user", "Still there?"),
        ("assistant", "After the restart."),
    ]
    assert final["messages"][:2] == before["messages"]
    assert final["last_sequence"] == after_turn.terminal["sequence"]


def test_it_sends_exactly_the_effective_instructions_as_the_system_prompt(
    live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    custom = "  Be Flarebot, but terse.\n\n\tAnswer in one line — and sign with ✓ 🚀.  \n"
    initially = live_owner.api("GET", "/api/settings/instructions/").json()
    existing = live_owner.create_conversation("Existing")

    with live_owner.socket(existing) as socket:
        socket.ask("First, with the defaults.")
        customized = live_owner.api("PUT", "/api/settings/instructions/", json={"text": custom})
        socket.ask("Second, customized.")
        newer = live_owner.create_conversation("Newer")
        with live_owner.socket(newer) as other:
            other.ask("Third, customized, elsewhere.")
        reset = live_owner.api("DELETE", "/api/settings/instructions/")
        socket.ask("Fourth, with the defaults again.")

    assert (initially["customized"], initially["effective"]) == (False, DEFAULT_INSTRUCTIONS)
    assert customized.status_code == 200
    assert customized.json()["effective"] == custom
    assert reset.status_code == 200
    assert reset.json()["customized"] is False
    sent = [(request_text(r)[-1][1], r.body["system"]) for r in fake_providers.requests]
    assert sent == [
        ("First, with the defaults.", system_prompt(DEFAULT_INSTRUCTIONS)),
        ("Second, customized.", system_prompt(custom)),
        ("Third, customized, elsewhere.", system_prompt(custom)),
        ("Fourth, with the defaults again.", system_prompt(DEFAULT_INSTRUCTIONS)),
    ]


@contextmanager
def broker_traffic(client: redis.Redis) -> Iterator[list[str]]:
    """Record, as text, every command the Redis server receives meanwhile (MONITOR)."""
    commands: list[str] = []
    monitor = client.monitor()
    monitor.__enter__()
    stopped = threading.Event()

    def record() -> None:
        while not stopped.is_set():
            try:
                commands.append(monitor.next_command()["command"])
            except (redis.RedisError, OSError, ValueError):
                return

    reader = threading.Thread(target=record, daemon=True)
    reader.start()
    try:
        yield commands
    finally:
        stopped.set()
        client.ping()  # a last command wakes the reader
        reader.join(5)
        monitor.__exit__(None, None, None)


def task_messages(commands: list[str]) -> Iterator[dict[str, Any]]:
    """The Celery task messages among recorded broker commands (kombu pushes them), decoded."""
    for command in list(commands):
        verb, _, rest = command.partition(" ")
        queue, _, payload = rest.partition(" ")
        if verb.upper() != "LPUSH" or not payload.startswith("{"):
            continue
        envelope = json.loads(payload)
        body = envelope["body"]
        if envelope["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body).decode("utf-8")
        yield {"queue": queue, "headers": envelope["headers"], "body": json.loads(body)}


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def redis_dump(client: redis.Redis) -> str:
    """Return every value of this run's Redis database as text, broker bodies decoded."""
    out: list[str] = []
    for key in client.scan_iter(count=1000):
        kind = _text(client.type(key))
        values: list[Any] = []
        if kind == "string":
            values = [client.get(key) or b""]
        elif kind == "list":
            values = list(client.lrange(key, 0, -1))
        elif kind == "hash":
            values = [v for pair in client.hgetall(key).items() for v in pair]
        elif kind == "set":
            values = list(client.smembers(key))
        elif kind == "zset":
            values = list(client.zrange(key, 0, -1))
        for value in values:
            text = _text(value)
            out.append(text)
            for encoded in _base64_bodies(text):
                out.append(base64.b64decode(encoded).decode("utf-8", "replace"))
    return "\n".join(out)


def _base64_bodies(text: str) -> list[str]:
    try:
        message = json.loads(text)
    except ValueError:
        return []
    envelope = message[0] if isinstance(message, list) and message else message
    if isinstance(envelope, dict) and envelope.get("properties", {}).get("body_encoding") == "base64":
        return [envelope["body"]]
    return []


def database_dump() -> tuple[str, list[bytes]]:
    """Return every row of every table the ORM knows, as text, and every binary value."""
    texts: list[str] = []
    blobs: list[bytes] = []
    for model in apps.get_models(include_auto_created=True):
        if model._meta.proxy:
            continue
        for row in model._base_manager.values():
            for value in row.values():
                if isinstance(value, memoryview | bytes):
                    blobs.append(bytes(value))
                else:
                    texts.append(json.dumps(value, default=str, ensure_ascii=False))
    return "\n".join(texts), blobs


def test_it_never_stores_logs_or_queues_the_provider_key(
    live_stack: LiveStack, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    secret = anthropic_key.removeprefix("sk-ant-api03-")
    echoed = key_echoing_error(anthropic_key)
    # Long enough for the second turn to wait until its Celery task goes out.
    fake_providers.script(paced([f"Sentence {i}. " for i in range(80)], 0.05), [HttpError(401, echoed)])
    worker_log = live_stack.log_size("worker")
    broker = redis.Redis.from_url(settings.REDIS_URL)
    conversation_id = live_owner.create_conversation()

    with broker_traffic(broker) as sent, live_owner.socket(conversation_id) as socket:
        socket.send_message("Say eighty sentences.")
        socket.read_until(lambda r: r.frame["type"] == "ack")
        socket.read_deltas(1)
        # Queued behind the first turn, this one is still waiting when its Celery task goes out.
        waiting_request = socket.send_message("And now?")
        *_, ack = socket.read_until(lambda r: r.frame.get("request_id") == waiting_request)
        turn_id = ack.frame["turn_id"]
        eventually(
            live_stack,
            lambda: any(m["body"][0] == [turn_id] for m in task_messages(sent)),
            timeout=10,
            what="the waiting turn's task message",
        )
        failed = socket.read_until_event(("turn.completed", "turn.failed", "turn.cancelled"), turn_id=turn_id)

    assert failed[-1].frame["event"] == "turn.failed"
    assert [r.headers["x-api-key"] for r in fake_providers.requests] == [anthropic_key] * 2
    messages = [m for m in task_messages(sent) if m["body"][0] == [turn_id]]
    assert [m["body"][:2] for m in messages] == [[[turn_id], {}]]
    assert {m["headers"]["task"] for m in messages} == {"conversations.jobs.turn_run"}
    assert not any(secret in command for command in sent)
    assert not any(secret in json.dumps(m["body"]) for m in task_messages(sent))
    # The turns' own lines were logged before their ends were published; wait for the task's
    # (received, succeeded) too, so the logs below are complete.
    eventually(
        live_stack,
        lambda: live_stack.log_since("worker", worker_log).count("conversations.jobs.turn_run[") >= 2,
        timeout=10,
        what="the worker to log the waiting turn's task",
    )
    logs = live_stack.logs()
    assert "Task conversations.jobs.turn_run[" in logs
    assert secret not in logs
    rows, blobs = database_dump()
    assert "Say eighty sentences." in rows
    assert secret not in rows
    assert blobs
    assert not any(secret.encode() in blob or anthropic_key.encode() in blob for blob in blobs)
    sealed = bytes(ProviderKey.objects.get(provider="anthropic").sealed)
    installation = Installation.objects.get()
    assert unseal(sealed, server_secret=settings.SECRET_KEY, installation_id=installation.installation_id).reveal() == (
        anthropic_key
    )
    assert secret not in redis_dump(broker)
