"""The shell tool inside real turns: what its card receives while the command runs.

The model is the loopback provider; the command runs in the real sandbox (network `none`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from flarebot.core.text import utf16_length
from tests.support.engine import (
    assistant_parts,
    events,
    eventually,
    new_conversation,
    orm,
    run,
    submit,
    tool_parts,
)
from tests.support.fake_providers import Call, Text
from tools.selectors import activity_page

pytestmark = pytest.mark.django_db(transaction=True)


async def stored_card(conversation_id) -> dict[str, Any] | None:
    page = await orm(activity_page)(conversation_id=conversation_id, before=None)
    return dict(page.activities[0]) if page.activities else None


async def test_a_running_commands_output_reaches_its_card_once_in_pieces_and_whole_in_the_stored_card(
    anthropic, fake_providers, cancels
):
    command = "echo first; sleep 0.5; echo 'oops: ünïcode' >&2; sleep 3; seq 1 2000; sleep 2; echo last"
    fake_providers.script([Call("c1", "shell", {"command": command})], [Text("It ran.")])
    conversation_id = await new_conversation()
    turn = await submit(conversation_id, "Run it")
    running = asyncio.ensure_future(run(turn.id, cancels))

    async def printed_so_far() -> dict[str, Any] | None:
        card = await stored_card(conversation_id)
        output = ((card or {}).get("progress") or {}).get("output")
        return card if output and "oops" in output["text"] else None

    mid_run = await eventually(printed_so_far, timeout=20, what="the stored card's output while the command runs")
    assert mid_run["status"] == "running"
    assert mid_run["progress"]["output"] == {"start": 0, "text": "first\noops: ünïcode\n"}  # what a reload shows
    await running

    cards = [e.data["activity"] for e in await events(conversation_id) if e.kind == "activity.updated"]
    pieces = [(card["status"], card["progress"]["output"]) for card in cards if "output" in (card["progress"] or {})]
    whole = "first\noops: ünïcode\n" + "".join(f"{n}\n" for n in range(1, 2001)) + "last\n"
    text = ""
    for status, piece in pieces:
        assert status == "running"
        assert piece["start"] == utf16_length(text)  # each piece follows the one before
        text += piece["text"]
    # Each character travelled once, in the order printed; what came just before the end
    # may not have (the result follows at once, and the card then drops the output).
    assert whole.startswith(text)
    assert text.endswith("2000\n") or text == whole
    assert len(pieces) >= 2
    assert sum(len(json.dumps(card)) for card in cards) < len(json.dumps(whole)) + 1500 * len(cards)
    assert "output" not in (cards[-1]["progress"] or {})  # finished: the tool part holds the result
    final = await stored_card(conversation_id)
    assert final is not None
    assert "output" not in (final["progress"] or {})
    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["output"]["stdout"], part["output"]["stderr"]) == (
        whole.replace("oops: ünïcode\n", ""),
        "oops: ünïcode\n",
    )
    progress_events = [e.data for e in await events(conversation_id) if e.kind == "tool.progress"]
    assert progress_events
    assert all("output" not in data["progress"] for data in progress_events)  # the card's events alone carry it
