"""Conversation titles: the rule, and the first message titling its conversation by every path.

The socket and `POST .../messages/` both go through the submit statement that titles the
conversation (one statement on PostgreSQL, several on SQLite: the suite runs on both).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from conversations import services, titling
from conversations.models import Conversation, Message, MessageRole, Turn, TurnStatus, answer_ordinal
from conversations.services import NAME_MAX_UTF16, conversation_name_clean
from conversations.titles import (
    TITLE_INSTRUCTIONS,
    TITLE_MAX_UTF16,
    conversation_title_from_model,
    conversation_title_from_text,
)
from conversations.turns import turn_submit, turn_submit_version_unpublished
from conversations.versions import branch_switch
from flarebot.core.text import utf16_length
from tests.conversations.test_consumers import (
    CLOSE_TIMEOUT,
    conversation_path,
    open_socket,
    owner_headers,
    session_key_of,
    sockets,
)
from tests.core.test_middleware import client_like
from tests.support.engine import Provider, sent
from tests.support.fake_providers import FakeProviders, Hold, Text

LIST = "/api/conversations/"

sockets = sockets  # the fixture, shared with the socket tests


def words_of_length(units: int) -> str:
    """Text of exactly `units` characters made of 4-letter words ("abcd abcd ... ab")."""
    return ("abcd " * units)[:units]


# --- The rule ----------------------------------------------------------------------------


def test_it_keeps_a_text_of_exactly_the_limit_whole():
    text = words_of_length(TITLE_MAX_UTF16 - 1) + "z"

    assert utf16_length(text) == TITLE_MAX_UTF16
    assert conversation_title_from_text(text) == text


def test_it_cuts_a_text_one_over_the_limit_at_a_word_boundary_without_an_ellipsis():
    text = "Plan for the kitchen renovation budget and timeline and cost"  # 60
    over = text + "s"

    assert conversation_title_from_text(text) == text
    assert conversation_title_from_text(over) == "Plan for the kitchen renovation budget and timeline and"


def test_it_keeps_a_word_that_ends_right_at_the_cut():
    words = "abcd " * 11 + "efghi"  # the word ends at 60 units: exactly the limit
    assert utf16_length(words) == TITLE_MAX_UTF16

    assert conversation_title_from_text(words + " more words") == words


def test_it_cuts_a_single_overlong_word_hard():
    word = "Supercalifragilistic" * 5

    assert conversation_title_from_text(word) == word[:TITLE_MAX_UTF16]
    assert conversation_title_from_text(f"See {word}") == f"See {word}"[:TITLE_MAX_UTF16]


def test_it_never_splits_a_character_outside_the_basic_plane():
    text = "a" * (TITLE_MAX_UTF16 - 2) + "😀😀"

    title = conversation_title_from_text(text)

    assert title == "a" * (TITLE_MAX_UTF16 - 2) + "😀"
    title.encode("utf-8")  # no lone surrogate


def test_it_drops_punctuation_left_at_the_cut():
    text = "Budget, " + "timeline, " * 5 + "and more words to come after the limit"

    title = conversation_title_from_text(text)

    assert title == "Budget, timeline, timeline, timeline, timeline, timeline"


def test_it_collapses_whitespace_and_control_characters_into_single_spaces():
    text = "  \n\tKitchen\r\n\r\n   renovation\u00a0\u2003budget\x07plan\u2028 \x85 \n"

    assert conversation_title_from_text(text) == "Kitchen renovation budget plan"


@pytest.mark.parametrize(
    "invisible",
    [*"\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069", *"\u200b\u200c\u200d\u200e\u200f\u2060\ufeff\u00ad"],
    ids=lambda ch: f"U+{ord(ch):04X}",
)
def test_it_strips_bidi_controls_and_zero_width_characters(invisible):
    title = conversation_title_from_text(f"{invisible}Pay {invisible}the{invisible} invoice{invisible}")

    assert title == "Pay the invoice"


@pytest.mark.parametrize(
    "text",
    ["\u200b\u200d\ufeff", "\u202e\u2066", "\x07\x08", "\u3000\u2028"],
    ids=["zero-width", "bidi", "controls", "spaces"],
)
def test_it_gives_the_default_name_when_nothing_visible_is_left(text):
    assert conversation_title_from_text(text) == "New conversation"


@pytest.mark.parametrize(
    "text",
    [
        "x" * 32_000,
        "word " * 6_400,
        "😀" * 16_000,
        "\u202eevil\u202c \x00\x01 name\u200b" * 100,
        " \n" * 100 + "late start",
        "ab\u0301" * 40,
    ],
    ids=["long-word", "many-words", "emoji", "controls", "late-start", "combining"],
)
def test_it_makes_titles_that_are_valid_names_within_the_limit(text):
    title = conversation_title_from_text(text)

    assert conversation_name_clean(title) == title
    assert 1 <= utf16_length(title) <= TITLE_MAX_UTF16 <= NAME_MAX_UTF16
    assert not any(ch in title for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200d\ufeff")


# --- Titling by the first message ---------------------------------------------------------


def post_message(client, conversation_id: object, text: str, request_id: uuid.UUID | None = None):
    body = {"request_id": str(request_id or uuid.uuid4()), "text": text}
    return client.post(f"{LIST}{conversation_id}/messages/", json.dumps(body), content_type="application/json")


def create(client, body: dict[str, str]) -> str:
    response = client.post(LIST, json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def listed(client) -> list[tuple[str, str]]:
    return [(c["id"], c["name"]) for c in client.get(LIST).json()["conversations"]]


LONG_MESSAGE = "Plan for the kitchen renovation budget and timeline, with a list of the contractors to call first"
LONG_TITLE = "Plan for the kitchen renovation budget and timeline, with a"


@pytest.mark.django_db(transaction=True)
def test_it_titles_an_unnamed_conversation_after_its_first_message_posted(owner_client):
    conversation_id = create(owner_client, {})

    response = post_message(owner_client, conversation_id, LONG_MESSAGE)

    assert response.status_code == 202, response.content
    assert listed(owner_client) == [(conversation_id, LONG_TITLE)]


@pytest.mark.django_db(transaction=True)
def test_it_never_retitles_on_a_second_message_or_a_repeated_request(owner_client):
    conversation_id = create(owner_client, {})
    first = uuid.uuid4()
    post_message(owner_client, conversation_id, "Pasta for four", first)

    assert post_message(owner_client, conversation_id, "Something else entirely").status_code == 202
    assert post_message(owner_client, conversation_id, "Pasta for four, again", first).status_code == 202

    assert listed(owner_client) == [(conversation_id, "Pasta for four")]


@pytest.mark.django_db(transaction=True)
def test_it_never_replaces_a_name_the_owner_gave_at_creation(owner_client):
    conversation_id = create(owner_client, {"name": "New conversation"})

    post_message(owner_client, conversation_id, "Pasta for four")

    assert listed(owner_client) == [(conversation_id, "New conversation")]


@pytest.mark.django_db(transaction=True)
def test_it_never_replaces_a_name_the_owner_gave_before_the_first_message(owner_client):
    conversation_id = create(owner_client, {})
    renamed = owner_client.patch(
        f"{LIST}{conversation_id}/", json.dumps({"name": "Dinner"}), content_type="application/json"
    )
    assert renamed.status_code == 200

    post_message(owner_client, conversation_id, "Pasta for four")

    assert listed(owner_client) == [(conversation_id, "Dinner")]


@pytest.mark.django_db(transaction=True)
def test_it_keeps_the_owners_rename_of_a_titled_conversation(owner_client):
    conversation_id = create(owner_client, {})
    post_message(owner_client, conversation_id, "Pasta for four")
    owner_client.patch(f"{LIST}{conversation_id}/", json.dumps({"name": "Dinner"}), content_type="application/json")

    post_message(owner_client, conversation_id, "And dessert?")

    assert listed(owner_client) == [(conversation_id, "Dinner")]


@pytest.mark.django_db(transaction=True)
def test_it_titles_nothing_when_the_message_is_refused(owner_client):
    conversation_id = create(owner_client, {})

    assert post_message(owner_client, conversation_id, "x" * 32_001).status_code == 400
    assert post_message(owner_client, conversation_id, "  \n ").status_code == 400

    assert listed(owner_client) == [(conversation_id, "New conversation")]


@pytest.mark.django_db(transaction=True)
def test_it_moves_a_conversation_to_the_top_with_a_message_and_not_with_a_rename(owner_client):
    quiet = create(owner_client, {"name": "Quiet"})
    busy = create(owner_client, {"name": "Busy"})
    a_day_ago = timezone.now() - timedelta(days=1)
    Conversation.objects.filter(id=busy).update(updated_at=a_day_ago)
    assert [name for _, name in listed(owner_client)] == ["Quiet", "Busy"]

    owner_client.patch(f"{LIST}{busy}/", json.dumps({"name": "Busy, renamed"}), content_type="application/json")
    assert [name for _, name in listed(owner_client)] == ["Quiet", "Busy, renamed"]
    assert Conversation.objects.get(id=busy).updated_at == a_day_ago

    post_message(owner_client, busy, "Anything new?")

    assert [name for _, name in listed(owner_client)] == ["Busy, renamed", "Quiet"]
    assert Conversation.objects.get(id=busy).updated_at > Conversation.objects.get(id=quiet).updated_at


@pytest.mark.django_db(transaction=True)
async def test_it_titles_an_unnamed_conversation_after_its_first_message_on_the_socket(
    owner_client, sockets: Callable[..., WebsocketCommunicator]
):
    conversation = await database_sync_to_async(services.conversation_create)()
    other = await database_sync_to_async(services.conversation_create)(name="Other")
    path = conversation_path(conversation.id)
    communicator = await open_socket(sockets, path, owner_headers(session_key_of(owner_client)))

    for text in ["\u202eKitchen renovation:\n\nbudget\u200b and timeline", "Second thoughts"]:
        request_id = str(uuid.uuid4())
        await communicator.send_json_to({"type": "user_message", "request_id": request_id, "text": text})
        ack = await communicator.receive_json_from(timeout=CLOSE_TIMEOUT)
        assert (ack["type"], ack["request_id"]) == ("ack", request_id)
        queued = await communicator.receive_json_from(timeout=CLOSE_TIMEOUT)
        assert queued["event"] == "turn.queued"

    names = await database_sync_to_async(lambda: listed(owner_client))()
    assert names == [(str(conversation.id), "Kitchen renovation: budget and timeline"), (str(other.id), "Other")]


# --- Names stored before titles existed -----------------------------------------------------


@pytest.mark.database
@pytest.mark.django_db(transaction=True)
def test_it_marks_existing_names_as_the_owners_unless_they_are_the_default(owner_client):
    executor = MigrationExecutor(connection)
    before = [("conversations", "0003_drop_indexes_covered_by_composites")]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("conversations", "Conversation")
    named = old.objects.create(name="Trip to Lisbon").id
    untouched = old.objects.create(name="New conversation").id

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    for conversation_id in (named, untouched):
        post_message(owner_client, conversation_id, "Pasta for four")

    assert dict(listed(owner_client)) == {str(named): "Trip to Lisbon", str(untouched): "Pasta for four"}


@pytest.mark.parametrize(
    ("text", "title"),
    [
        (
            "Here is a summary.\n\n| Name | Qty | Price |\n|---|---|---|\n| Kettle | 1 | 25 |",
            "Here is a summary. Name Qty Price Kettle 1 25",
        ),
        (
            "# Plan for **Monday**\n- buy [milk](https://shop.example/milk)\n- call ~~Bob~~ Ann",
            "Plan for Monday buy milk call Bob Ann",
        ),
        ("```python\nprint(1)\n```\nWhat does it print?", "What does it print?"),
        ("```python\nprint(1)\n```", "print(1)"),
        ("> A quoted line\n\n1. first\n2) second", "A quoted line first second"),
        ("![A chart](chart.png) of [sales][q3]", "A chart of sales"),
        ("See <https://example.org/a> now", "See https://example.org/a now"),
        ("snake_case_name and 2*3 stay", "snake_case_name and 2*3 stay"),
        ("| a | b |\n|:--|--:|", "a b"),
    ],
)
def test_a_title_is_the_plain_text_of_markdown(text, title):
    assert conversation_title_from_text(text) == title


def test_a_long_markdown_table_is_cut_at_a_word_boundary_without_pipes():
    table = "| Product | Quantity | Unit price | Total |\n|---|---|---|---|\n" + "| Kettle | 1 | 25.00 | 25.00 |\n" * 20

    title = conversation_title_from_text("Here is a summary.\n\n" + table)

    assert "|" not in title
    assert "---" not in title
    assert not title.endswith("…")
    assert len(title) <= 60


# --- Titles from the model ------------------------------------------------------------------

CODE_FIRST = "```python\n" + "while True:\n    tick()\n" * 15 + "```\nWhy does this loop never end?"


def answered(text: str, answer: str = "Because nothing breaks out of it.") -> uuid.UUID:
    """An untitled conversation whose first message has a completed answer, as a turn's end leaves it."""
    conversation = services.conversation_create()
    turn, _ = turn_submit(conversation_id=conversation.id, request_id=uuid.uuid4(), text=text)
    Message.objects.create(
        conversation_id=conversation.id,
        turn_id=turn.id,
        role=MessageRole.ASSISTANT,
        ordinal=answer_ordinal(turn.ordinal),
        parts=[{"type": "text", "text": answer}],
    )
    Turn.objects.filter(id=turn.id).update(status=TurnStatus.COMPLETED)
    return conversation.id


def name_of(conversation_id: uuid.UUID) -> str:
    return Conversation.objects.get(id=conversation_id).name


@pytest.mark.parametrize(
    ("answer", "title"),
    [
        ("Balcony plants for north light", "Balcony plants for north light"),
        ("“Plantes pour un balcon au nord”.", "Plantes pour un balcon au nord"),
        ('**Title:** "Kitchen renovation budget"', "Kitchen renovation budget"),
        ("# Fixing an endless loop\n\nThis title says what was asked.", "Fixing an endless loop"),
        ("'Dogs' toys'", "Dogs' toys"),
        ("one two three four five six seven eight", "one two three four five six"),
        ("\u202eTrip\u200b to Lisbon —", "Trip to Lisbon"),
        ("x" * 200, "x" * TITLE_MAX_UTF16),
    ],
)
def test_a_models_title_is_cleaned_to_six_words_without_quotes(answer, title):
    assert conversation_title_from_model(answer) == title
    assert conversation_name_clean(title) == title


@pytest.mark.parametrize("answer", ["", "  \n ", '""', "«»", "**"])
def test_a_model_answer_without_words_gives_no_title(answer):
    assert conversation_title_from_model(answer) is None


@pytest.mark.django_db(transaction=True)
def test_the_model_names_a_conversation_after_its_first_answer_in_a_request_of_its_own(
    owner_client, provider: Provider, fake_providers: FakeProviders
):
    fake_providers.titles("“Stopping an endless loop”.")
    fake_providers.script([Text("A turn's answer, not a title's.")])
    conversation_id = answered(CODE_FIRST)
    assert name_of(conversation_id) == "Why does this loop never end?"  # the code is not the title

    assert titling.conversation_title_ask(conversation_id=conversation_id) == "Stopping an endless loop"

    assert listed(owner_client) == [(str(conversation_id), "Stopping an endless loop")]
    [request] = fake_providers.title_requests
    asked = sent(provider, request.body)
    assert (asked.system, asked.max_tokens, asked.tool_names) == (TITLE_INSTRUCTIONS, titling.TITLE_MAX_TOKENS, None)
    [(role, quoted)] = asked.transcript
    assert role == "user"
    assert "Why does this loop never end?" in quoted
    assert "[22 more lines of code]" in quoted
    assert "Because nothing breaks out of it." in quoted
    assert request.body["model"] == provider.model
    # The turns' script is untouched, and nothing was asked as a turn.
    assert fake_providers.requests == []
    assert len(fake_providers.scripts) == 1
    # Asked once: a second delivery of the job asks nothing.
    assert titling.conversation_title_ask(conversation_id=conversation_id) is None
    assert len(fake_providers.title_requests) == 1
    found = owner_client.get(LIST, {"q": "endless"}).json()["results"]
    assert [r["conversation"]["name"] for r in found] == ["Stopping an endless loop"]


@pytest.mark.django_db(transaction=True)
def test_a_title_request_that_fails_leaves_the_first_message_without_an_ellipsis(
    owner_client, anthropic: Provider, fake_providers: FakeProviders
):
    conversation_id = answered(LONG_MESSAGE)

    assert titling.conversation_title_ask(conversation_id=conversation_id) is None  # unscripted: 503

    assert len(fake_providers.title_requests) == 1
    assert listed(owner_client) == [(str(conversation_id), LONG_TITLE)]
    assert not LONG_TITLE.endswith("…")
    assert not titling.conversation_title_wanted(conversation_id=conversation_id)


@pytest.mark.django_db(transaction=True)
def test_a_title_request_that_never_answers_gives_up_after_its_bound(
    owner_client, anthropic: Provider, fake_providers: FakeProviders, monkeypatch
):
    held = Hold(seconds=60)
    fake_providers.titles([held])
    monkeypatch.setattr(titling, "TITLE_TIMEOUT_SECONDS", 0.5)
    conversation_id = answered("Pasta for four")
    try:
        response = owner_client.post(f"{LIST}{conversation_id}/title/", content_type="application/json")
    finally:
        held.release()

    assert response.status_code == 502
    assert response.json()["error"]["code"] == "title_unavailable"
    assert name_of(conversation_id) == "Pasta for four"


@pytest.mark.django_db(transaction=True)
def test_the_model_never_replaces_a_name_the_owner_gave(
    owner_client, anthropic: Provider, fake_providers: FakeProviders
):
    fake_providers.titles("A title nobody wants")
    conversation_id = answered("Pasta for four")
    owner_client.patch(f"{LIST}{conversation_id}/", json.dumps({"name": "Dinner"}), content_type="application/json")

    assert not titling.conversation_title_wanted(conversation_id=conversation_id)
    assert titling.conversation_title_ask(conversation_id=conversation_id) is None

    assert fake_providers.title_requests == []
    assert listed(owner_client) == [(str(conversation_id), "Dinner")]


@pytest.mark.django_db(transaction=True)
def test_a_versions_switch_keeps_the_models_title_and_an_edit_of_the_first_message_asks_again(
    owner_client, anthropic: Provider, fake_providers: FakeProviders
):
    fake_providers.titles("Pasta dinner for four", "Risotto for six")
    conversation_id = answered("Pasta for four")
    titling.conversation_title_ask(conversation_id=conversation_id)
    [first] = Turn.objects.filter(conversation_id=conversation_id)

    again = turn_submit_version_unpublished(
        conversation_id=conversation_id, request_id=uuid.uuid4(), text="Pasta for four", version_of=first.id
    )
    assert name_of(conversation_id) == "Pasta dinner for four"  # Regenerate: the same first message
    Turn.objects.filter(id=again.turn.id).update(status=TurnStatus.CANCELLED)
    edited = turn_submit_version_unpublished(
        conversation_id=conversation_id, request_id=uuid.uuid4(), text="Risotto for six", version_of=again.turn.id
    )
    assert name_of(conversation_id) == "Risotto for six"  # the new first message, until its answer
    assert titling.conversation_title_wanted(conversation_id=conversation_id)
    Message.objects.create(
        conversation_id=conversation_id,
        turn_id=edited.turn.id,
        role=MessageRole.ASSISTANT,
        ordinal=answer_ordinal(edited.turn.ordinal),
        parts=[{"type": "text", "text": "Arborio, stock, patience."}],
    )
    Turn.objects.filter(id=edited.turn.id).update(status=TurnStatus.COMPLETED)
    assert titling.conversation_title_ask(conversation_id=conversation_id) == "Risotto for six"

    branch_switch(conversation_id=conversation_id, turn_id=first.id)  # back to the first message
    assert name_of(conversation_id) == "Pasta for four"
    assert len(fake_providers.title_requests) == 2


# --- Regenerate: POST /api/conversations/{id}/title/ ----------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_regenerate_answers_a_new_title_and_stores_nothing(
    owner_client, anthropic: Provider, fake_providers: FakeProviders
):
    fake_providers.titles("Dinner plans for Friday")
    conversation_id = answered("Pasta for four on Friday")

    response = owner_client.post(f"{LIST}{conversation_id}/title/", content_type="application/json")

    assert response.status_code == 200, response.content
    assert response.json() == {"title": "Dinner plans for Friday"}
    assert listed(owner_client) == [(str(conversation_id), "Pasta for four on Friday")]
    assert not Conversation.objects.get(id=conversation_id).name_is_custom
    [request] = fake_providers.title_requests
    assert request.body["system"] == TITLE_INSTRUCTIONS


@pytest.mark.django_db(transaction=True)
def test_regenerate_says_why_there_is_no_title(owner_client, anthropic: Provider, fake_providers: FakeProviders):
    empty = create(owner_client, {})
    conversation_id = answered("Pasta for four")

    nothing = owner_client.post(f"{LIST}{empty}/title/", content_type="application/json")
    # Unscripted, the model is overloaded.
    refused = owner_client.post(f"{LIST}{conversation_id}/title/", content_type="application/json")
    unknown = owner_client.post(f"{LIST}{uuid.uuid4()}/title/", content_type="application/json")
    with_body = owner_client.post(f"{LIST}{conversation_id}/title/", {"name": "x"}, content_type="application/json")

    assert (nothing.status_code, nothing.json()["error"]["code"]) == (409, "nothing_to_title")
    assert (refused.status_code, refused.json()["error"]["code"]) == (502, "title_unavailable")
    assert "Anthropic is overloaded" in refused.json()["error"]["message"]
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "conversation_not_found")
    assert with_body.status_code == 400
    assert len(fake_providers.title_requests) == 1


@pytest.mark.parametrize("origin_header", ["https://evil.example", None])
@pytest.mark.django_db(transaction=True)
def test_regenerate_needs_the_exact_origin(owner_client, anthropic, fake_providers: FakeProviders, origin_header):
    conversation_id = answered("Pasta for four")

    client = client_like(owner_client, origin_header)
    response = client.post(f"{LIST}{conversation_id}/title/", content_type="application/json")

    assert (response.status_code, response.json()["error"]["code"]) == (403, "origin_refused")
    assert fake_providers.title_requests == []


# --- Every tab hears names and the list's order ---------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_every_socket_that_asked_hears_a_conversation_move_up_or_get_a_name(
    owner_client, sockets: Callable[..., WebsocketCommunicator]
):
    shown = await database_sync_to_async(services.conversation_create)(name="Shown")
    other = await database_sync_to_async(services.conversation_create)()
    headers = owner_headers(session_key_of(owner_client))
    socket = await open_socket(sockets, f"{conversation_path(shown.id)}?notices=1", headers)
    quiet = await open_socket(sockets, conversation_path(shown.id), headers)

    await database_sync_to_async(post_message)(owner_client, other.id, "Pasta for four")
    moved = [json.loads(await socket.receive_from(timeout=CLOSE_TIMEOUT)) for _ in range(2)]
    listed_then = await database_sync_to_async(lambda: client_json(owner_client, other.id))()
    await database_sync_to_async(owner_client.patch)(
        f"{LIST}{other.id}/", json.dumps({"name": "Dinner"}), content_type="application/json"
    )
    renamed = [json.loads(await socket.receive_from(timeout=CLOSE_TIMEOUT)) for _ in range(2)]

    assert moved[0] == {"type": "unread", "conversation_id": str(other.id), "unread": 0}
    assert moved[1]["type"] == "conversation_changed"
    assert moved[1]["conversation"] == listed_then
    assert moved[1]["conversation"]["name"] == "Pasta for four"
    assert renamed[1]["type"] == "conversation_changed"
    assert renamed[1]["conversation"]["name"] == "Dinner"
    assert renamed[1]["conversation"]["updated_at"] == moved[1]["conversation"]["updated_at"]
    assert await quiet.receive_nothing(timeout=0.2)


def client_json(client, conversation_id: object) -> dict[str, object]:
    [found] = [c for c in client.get(LIST).json()["conversations"] if c["id"] == str(conversation_id)]
    return found
