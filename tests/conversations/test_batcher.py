"""Group-committed streaming writes: one failing write never fails the other turns' writes."""

from __future__ import annotations

import uuid

import pytest

from conversations.engine.batcher import StreamWrite, _write_batch
from conversations.engine.preparation import attempt_start
from conversations.eventlog import NewEvent
from conversations.models import Event, Message
from conversations.services import conversation_create
from conversations.turns import turn_submit
from tools.activity import Activity

pytestmark = pytest.mark.django_db(transaction=True)


def claimed_write(name: str, text: str) -> StreamWrite:
    conversation = conversation_create(name=name)
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Go")
    started = attempt_start(turn.id)
    assert started is not None
    claim, prepared = started
    parts = [{"type": "text", "text": text, "step": 0}]
    events: list[NewEvent] = [("text.delta", turn.id, {"text": text})]
    return StreamWrite(conversation.id, turn.id, claim.lease_token, prepared.assistant_message_id, parts, events)


def test_it_writes_a_batch_in_one_go(owner):
    first, second = claimed_write("A", "alpha"), claimed_write("B", "beta")

    results = _write_batch([first, second])

    assert [[f["event"] for f in frames or []] for frames in results] == [["text.delta"], ["text.delta"]]
    assert Message.objects.get(id=second.message_id).parts[0]["text"] == "beta"


def test_it_isolates_a_write_that_fails_and_keeps_the_others(owner):
    broken, fine = claimed_write("A", "alpha"), claimed_write("B", "beta")
    # An activity without its conversation violates a NOT NULL constraint in any database.
    bad = Activity(conversation_id=None, turn_id=broken.turn_id, tool_call_id="c1", kind="x", label="x")
    broken = StreamWrite(**{**broken.__dict__, "activities": (bad,)})

    results = _write_batch([broken, fine])

    assert results[0] is None
    assert results[1] is not None
    assert Message.objects.get(id=fine.message_id).parts[0]["text"] == "beta"
    assert Message.objects.get(id=broken.message_id).parts == []
    assert not Event.objects.filter(turn_id=broken.turn_id, kind="text.delta").exists()
    assert Event.objects.filter(turn_id=fine.turn_id, kind="text.delta").count() == 1
