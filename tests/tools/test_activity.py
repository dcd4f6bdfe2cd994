"""Tool activity: the safe card metadata, its pages, and its end with the turn or conversation."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from conversations.models import Conversation, Event, Turn
from conversations.services import conversation_create, conversation_delete, conversation_teardown
from conversations.turns import turn_claim, turn_finish, turn_submit
from tools.activity import (
    OUTPUT_MAX,
    UNKNOWN_TOOL_LABEL,
    activities_interrupt,
    activity_announced,
    activity_begin,
    activity_finish,
    activity_from_row,
    activity_hint,
    activity_progress,
    activity_reopen,
    activity_running,
    activity_store,
    safe_text,
)
from tools.models import ToolActivity
from tools.registry import Effect, Tool, tool_register, tool_unregister

pytestmark = [pytest.mark.django_db, pytest.mark.database]


def url(conversation_id: object, before: str | None = None) -> str:
    return f"/api/conversations/{conversation_id}/activities/" + (f"?before={before}" if before else "")


@pytest.fixture
def conversation(owner) -> Conversation:
    return conversation_create(name="Errands")


@pytest.fixture
def secret_tool():
    async def run(context, data):
        return {}

    tool_register(
        Tool(
            "fetch_page",
            "Fetch a page.",
            {"type": "object"},
            run,
            deadline=10,
            effect=Effect.READ,
            label="Reading a page",
            summarize=lambda result: f"Read {result['chars']} characters",
        )
    )
    yield
    tool_unregister("fetch_page")


def store_activities(conversation: Conversation, count: int) -> list[ToolActivity]:
    turn_id = uuid.uuid4()
    start = timezone.now() - timedelta(hours=1)
    for i in range(count):
        activity = activity_begin(conversation_id=conversation.id, turn_id=turn_id, tool_call_id=f"call_{i}", name="x")
        activity.created_at = start + timedelta(seconds=i)
        activity_store(activity)
    return list(ToolActivity.objects.order_by("-created_at"))


def test_it_keeps_card_text_to_160_characters_without_control_characters():
    assert safe_text("a" * 160) == "a" * 160
    assert safe_text("a" * 161) == "a" * 159 + "…"
    assert len(safe_text("a" * 161)) == 160
    assert safe_text("line one\nline\ttwo\x1b[31m\x85") == "line one line two [31m"


def test_it_labels_an_unknown_tool_generically_and_never_shows_its_name(conversation):
    activity = activity_begin(
        conversation_id=conversation.id, turn_id=uuid.uuid4(), tool_call_id="c1", name="<script>steal()</script>"
    )
    assert (activity.label, activity.kind, activity.status) == (UNKNOWN_TOOL_LABEL, "unknown", "pending")


def test_it_shows_only_what_the_descriptor_summarizes(conversation, secret_tool):
    activity = activity_begin(
        conversation_id=conversation.id, turn_id=uuid.uuid4(), tool_call_id="c1", name="fetch_page"
    )
    activity_progress(activity, {"message": "Loading\nhttps://x.test/?token=s3cr3t", "done": 1, "total": True})
    assert activity.progress == {"message": "Loading https://x.test/?token=s3cr3t", "done": 1, "total": None}

    activity_running(activity)
    activity_finish(activity, status="succeeded", output={"chars": 1200, "text": "private page text"})

    card = activity.as_json()
    assert (card["label"], card["summary"], card["status"]) == ("Reading a page", "Read 1200 characters", "succeeded")
    assert "private page text" not in str(card)
    assert card["duration_ms"] is not None
    assert card["duration_ms"] >= 0


def test_a_call_that_succeeded_takes_its_done_label_and_one_that_failed_keeps_its_label(conversation):
    async def run(context, data):
        return {}

    tool_register(
        Tool(
            "build",
            "Build.",
            {"type": "object"},
            run,
            deadline=10,
            effect=Effect.EFFECT,
            label="Building",
            done_label="Built",
        )
    )
    try:
        cards = []
        for status in ("succeeded", "failed"):
            activity = activity_begin(
                conversation_id=conversation.id, turn_id=uuid.uuid4(), tool_call_id="c1", name="build"
            )
            activity_running(activity)
            activity_finish(activity, status=status, output={}, message=None if status == "succeeded" else "No.")
            cards.append(activity.as_json()["label"])
    finally:
        tool_unregister("build")

    assert cards == ["Built", "Building"]


def test_it_keeps_a_hint_for_the_owner_bounded_stored_and_cleared_when_the_call_runs_again(owner_client, conversation):
    activity = activity_begin(conversation_id=conversation.id, turn_id=uuid.uuid4(), tool_call_id="c1", name="x")
    activity_hint(activity, "Allow it:\nFLAREBOT_NETWORK_ALLOW=" + "h" * 600)
    activity_finish(activity, status="interrupted", output=None, message="Stopped by a crash.")
    activity_store(activity)

    [card] = owner_client.get(url(conversation.id)).json()["activities"]
    assert card["hint"] == ("Allow it: FLAREBOT_NETWORK_ALLOW=" + "h" * 600)[:499] + "…"
    reopened = activity_reopen(ToolActivity.objects.get())
    assert reopened is not None
    assert reopened.hint == ""


def test_its_events_carry_each_piece_of_output_once_and_the_stored_card_all_of_it(owner_client, conversation):
    activity = activity_begin(conversation_id=conversation.id, turn_id=uuid.uuid4(), tool_call_id="c1", name="x")
    activity_running(activity)
    announced = []
    for output in ["", "😀 one\n", "😀 one\n", "😀 one\ntwo\x00\n"]:
        activity_progress(activity, {"message": "working", "output": output})
        announced.append(activity_announced(activity)["progress"])
    activity_store(activity)

    assert announced == [
        {"message": "working", "done": None, "total": None},
        {"message": "working", "done": None, "total": None, "output": {"start": 0, "text": "😀 one\n"}},
        {"message": "working", "done": None, "total": None},  # nothing new: no output
        # the emoji counts two UTF-16 units; NUL, which PostgreSQL refuses, is U+FFFD
        {"message": "working", "done": None, "total": None, "output": {"start": 7, "text": "two\ufffd\n"}},
    ]
    [card] = owner_client.get(url(conversation.id)).json()["activities"]
    assert card["progress"]["output"] == {"start": 0, "text": "😀 one\ntwo\ufffd\n"}
    assert activity_from_row(ToolActivity.objects.get()).output == "😀 one\ntwo\ufffd\n"


def test_it_announces_output_again_from_its_start_when_it_was_rewritten_and_keeps_it_bounded(conversation):
    activity = activity_begin(conversation_id=conversation.id, turn_id=uuid.uuid4(), tool_call_id="c1", name="x")
    activity_progress(activity, {"message": "", "output": "abc"})
    activity_announced(activity)

    activity_progress(activity, {"message": "", "output": "xbcd"})
    assert activity_announced(activity)["progress"]["output"] == {"start": 0, "text": "xbcd"}
    activity_progress(activity, {"message": "", "output": "y" * (OUTPUT_MAX + 5)})
    assert activity_announced(activity)["progress"]["output"] == {"start": 0, "text": "y" * OUTPUT_MAX}
    activity_progress(activity, {"message": "no output in this report"})
    assert activity.output == "y" * OUTPUT_MAX  # kept


def test_it_drops_the_output_once_the_call_ended_but_keeps_an_interrupted_calls(owner_client, conversation):
    turn_id = uuid.uuid4()
    ended, cut_off = (
        activity_begin(conversation_id=conversation.id, turn_id=turn_id, tool_call_id=call, name="x")
        for call in ("ended", "cut_off")
    )
    for activity in (ended, cut_off):
        activity_running(activity)
        activity_progress(activity, {"message": "", "output": "printed so far\n"})
        activity_store(activity)
    activity_finish(ended, status="succeeded", output={"stdout": "printed so far\n"})
    activity_store(ended)

    [interrupted] = activities_interrupt(turn_id=turn_id)

    cards = {a["tool_call_id"]: a for a in owner_client.get(url(conversation.id)).json()["activities"]}
    assert "output" not in cards["ended"]["progress"]  # the tool part holds the result
    assert cards["cut_off"]["progress"]["output"] == {"start": 0, "text": "printed so far\n"}
    assert interrupted["progress"]["output"] == {"start": 0, "text": "printed so far\n"}


def test_it_pages_100_activities_newest_first_with_a_cursor(owner_client, conversation):
    rows = store_activities(conversation, 101)

    first = owner_client.get(url(conversation.id))
    assert first.status_code == 200, first.content
    body = first.json()
    assert [a["id"] for a in body["activities"]] == [str(r.id) for r in rows[:100]]
    assert body["next_cursor"]

    # A card updated meanwhile keeps its place: pages follow creation, not updates.
    ToolActivity.objects.filter(id=rows[100].id).update(status="failed", updated_at=timezone.now())
    second = owner_client.get(url(conversation.id, body["next_cursor"])).json()
    assert [a["id"] for a in second["activities"]] == [str(rows[100].id)]
    assert second["activities"][0]["status"] == "failed"
    assert second["next_cursor"] is None


def test_it_gives_exactly_100_in_one_page_without_a_cursor(owner_client, conversation):
    store_activities(conversation, 100)

    body = owner_client.get(url(conversation.id)).json()

    assert (len(body["activities"]), body["next_cursor"]) == (100, None)


@pytest.mark.parametrize("cursor", ["nonsense", "MjAyNi0xMS0yOXxub3QtYS11dWlk", "x" * 300, "%00"])
def test_it_refuses_a_cursor_it_did_not_give(owner_client, conversation, cursor):
    response = owner_client.get(url(conversation.id, cursor))

    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_cursor"


def test_it_answers_404_for_an_unknown_conversation(owner_client):
    response = owner_client.get(url(uuid.uuid4()))

    assert response.status_code == 404


def test_it_keeps_activities_private(anonymous_client, conversation):
    store_activities(conversation, 1)

    assert anonymous_client.get(url(conversation.id)).status_code == 401


def test_it_marks_open_activities_interrupted_when_their_turn_fails(conversation):
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text="Read it")
    claim = turn_claim(turn_id=turn.id, provider="anthropic", model="m")
    assert claim is not None
    activity_store(activity_begin(conversation_id=conversation.id, turn_id=turn.id, tool_call_id="c1", name="x"))

    assert turn_finish(turn_id=turn.id, lease_token=claim.lease_token, status="failed", code="x", message="Failed.")

    assert ToolActivity.objects.get(turn_id=turn.id).status == "interrupted"
    kinds = list(Event.objects.filter(turn_id=turn.id).order_by("sequence").values_list("kind", flat=True))
    assert kinds[-2:] == ["activity.updated", "turn.failed"]
    assert Turn.objects.get(id=turn.id).status == "failed"


def test_it_deletes_activities_with_their_conversation(conversation):
    other = conversation_create(name="Other")
    store_activities(conversation, 2)
    store_activities(other, 1)

    conversation_delete(conversation_id=conversation.id)
    conversation_teardown(conversation_id=conversation.id)

    assert list(ToolActivity.objects.values_list("conversation_id", flat=True)) == [other.id]
