"""Turns longer than a lease: renewal keeps them in their first attempt, beside other turns.

SLOW (about 45 s, by design): a lease lasts 15 s and is renewed every 5 s, so only a turn
that outlives several leases, with other turns in the table, shows that a renewal moves
its own row and nothing else.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from conversations.models import Event, Turn
from tests.support.fake_providers import Call, FakeProviders, Text
from tests.support.live_clients import TERMINAL_EVENTS, OwnerClient, delta_text

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

LONG_SECONDS = 40


def turn_rows(turn_ids) -> dict[str, tuple]:
    rows = Turn.objects.filter(id__in=turn_ids)
    return {str(t.id): (t.status, t.attempts, t.lease_token, t.lease_expires_at, t.updated_at) for t in rows}


def test_a_40_s_answer_and_a_40_s_shell_command_finish_in_their_first_attempt(
    live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    # Other turns in the table first: finished ones, whose rows nothing may touch.
    earlier = []
    for n in range(3):
        with live_owner.socket(live_owner.create_conversation(f"Earlier {n}")) as socket:
            earlier.append(socket.ask("A quick question").turn_id)
    before = turn_rows(earlier)
    chunks = [f"Second {n:02d} of the long answer. " for n in range(LONG_SECONDS * 2)]
    command = f"sleep {LONG_SECONDS}; echo slept"
    fake_providers.script(
        [Call("toolu_long_shell", "shell", {"command": command, "timeout_seconds": 45})],
        [Text(chunk, delay=0.5) for chunk in chunks],
        [Text("The command slept and printed slept.")],
    )
    shell_socket = live_owner.socket(live_owner.create_conversation("Long shell"))
    stream_socket = live_owner.socket(live_owner.create_conversation("Long answer"))
    try:
        shell_socket.send_message("Sleep for forty seconds in the shell.")
        shell_socket.read_until(
            lambda r: r.frame.get("event") == "activity.updated" and r.frame["data"]["activity"]["status"] == "running",
            timeout=30,
        )
        stream_socket.send_message("Write for forty seconds.")
        # Both read at once: a socket left unread stops answering its pings.
        with ThreadPoolExecutor(2) as readers:
            reads = [
                readers.submit(socket.read_until_event, TERMINAL_EVENTS, timeout=LONG_SECONDS + 30)
                for socket in (stream_socket, shell_socket)
            ]
            for read in reads:
                read.result()
        streamed, shelled = stream_socket.received, shell_socket.received
    finally:
        shell_socket.close()
        stream_socket.close()

    for received in (streamed, shelled):
        events = [r.frame for r in received if r.frame["type"] == "event"]
        assert events[-1]["event"] == "turn.completed", events[-1]
        assert "message.replaced" not in [e["event"] for e in events]
        assert [e["data"]["attempt"] for e in events if e["event"] == "turn.started"] == [1]
    assert delta_text(streamed) == "".join(chunks)
    stream_turn = streamed[-1].frame["turn_id"]
    shell_turn = shelled[-1].frame["turn_id"]
    assert Turn.objects.get(id=stream_turn).attempts == 1
    assert Turn.objects.get(id=shell_turn).attempts == 1
    [tool_finished] = Event.objects.filter(turn_id=shell_turn, kind="tool.finished")
    output = tool_finished.data["output"]
    assert (output["exit_code"], output["stdout"], output["timed_out"]) == (0, "slept\n", False)
    assert turn_rows(earlier) == before  # no renewal touched another turn's row
