"""A worker killed with SIGKILL in the middle of tool calls: what recovery runs again, and what not.

The first attempt runs in a separate process on the real engine (tests/support/
engine_process.py), which is killed while its calls work; recovery then runs in this
process once the dead attempt's lease has run out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from conversations.models import Turn
from conversations.providers.base import engine_call_id
from flarebot.core.env import BASE_DIR
from tests.support.engine import (
    assistant_parts,
    events,
    new_conversation,
    orm,
    run,
    submit,
    tool_parts,
    tool_results_sent,
    turn_get,
)
from tests.support.engine_process import crash_tools
from tests.support.fake_providers import Call, Text
from tests.support.live import database_url
from tools.models import ToolActivity
from tools.registry import tool_register, tool_unregister

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]

INTERRUPTED = {"error": "interrupted", "message": "The tool call was interrupted; its outcome is unknown."}


@pytest.fixture
def record(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "calls.txt"
    path.touch()
    tools = crash_tools(path, work_seconds=0)
    for tool in tools:
        tool_register(tool)
    yield path
    for tool in tools:
        tool_unregister(tool.name)


def run_until_killed(turn_id, record: Path, *, calls: int) -> None:
    """Run the turn's first attempt in another process; SIGKILL it once `calls` calls started."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flarebot.settings", "DATABASE_URL": database_url()}
    command = [sys.executable, "-m", "tests.support.engine_process", str(turn_id), str(record)]
    process = subprocess.Popen(command, cwd=BASE_DIR, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(record.read_text().splitlines()) < calls:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the calls never started"
            time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)


def lease_runs_out(turn_id) -> None:
    """Let the dead attempt's lease end now rather than in 15 s (the rest is the real recovery)."""
    Turn.objects.filter(id=turn_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


async def test_it_reruns_the_read_call_and_never_the_effect_call_after_a_sigkill(
    anthropic, record, fake_providers, cancels
):
    fake_providers.script(
        [Call("c_post", "send_postcard", {"city": "Faro"}), Call("c_wx", "weather_forecast", {"city": "Faro"})],
        [Text("The forecast is in; the postcard may or may not have gone.")],
    )
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Send a postcard to Faro and check its weather.")

    await orm(run_until_killed)(turn.id, record, calls=2)
    killed = await turn_get(turn.id)
    assert (killed.status, killed.attempts) == ("running", 1)
    await orm(lease_runs_out)(turn.id)
    await run(turn.id, cancels)

    assert (await turn_get(turn.id)).status == "completed"
    post, wx = engine_call_id(turn.id, 0, 0), engine_call_id(turn.id, 0, 1)
    starts = record.read_text().splitlines()
    assert sorted(starts) == sorted([f"send_postcard {post}", f"weather_forecast {wx}", f"weather_forecast {wx}"])
    parts = {p["tool_call_id"]: p for p in tool_parts(await assistant_parts(turn.id))}
    assert (parts[post]["provider_call_id"], parts[wx]["provider_call_id"]) == ("c_post", "c_wx")
    assert (parts[post]["status"], parts[post]["output"]) == ("interrupted", INTERRUPTED)
    assert (parts[wx]["status"], parts[wx]["output"]) == (
        "succeeded",
        {"done": "weather_forecast", "city": "Faro"},
    )
    # The model is told the effect call's outcome is unknown, and gets the re-run read.
    assert tool_results_sent(anthropic, fake_providers.requests[-1].body) == {
        "c_post": INTERRUPTED,
        "c_wx": {"done": "weather_forecast", "city": "Faro"},
    }
    cards = await orm(lambda: {a.tool_call_id: a for a in ToolActivity.objects.filter(turn_id=turn.id)})()
    assert (cards[post].status, cards[post].execution_count) == ("interrupted", 1)
    assert (cards[wx].status, cards[wx].execution_count) == ("succeeded", 2)
    kinds = [e.kind for e in await events(conversation_id)]
    assert kinds.count("turn.started") == 2
    assert len(fake_providers.requests) == 2
