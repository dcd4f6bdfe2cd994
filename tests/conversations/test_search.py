"""Searching conversations by name and message text, with memory search's query rules, on both databases."""

from __future__ import annotations

import uuid

import pytest

from conversations.models import Message, MessageRole, Turn, answer_ordinal
from conversations.search import snippet_marks
from conversations.services import conversation_create, conversation_delete, conversation_rename
from conversations.sql import MARK_END, MARK_START
from conversations.turns import turn_claim, turn_finish, turn_submit

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]

SEARCH = "/api/conversations/"


def finished_turn(conversation, question: str, answer: str, *, attachments=(), answer_parts=None) -> Turn:
    """A turn that ran to its end: the user's message and the answer, as the engine leaves them."""
    turn, _ = turn_submit(
        conversation_id=conversation.id, request_id=uuid.uuid4(), text=question, attachments=list(attachments)
    )
    claim = turn_claim(turn_id=turn.id)
    assert claim is not None
    Message.objects.create(
        conversation=conversation,
        turn=turn,
        role=MessageRole.ASSISTANT,
        ordinal=answer_ordinal(turn.ordinal),
        parts=answer_parts or [{"type": "text", "text": answer}],
    )
    assert turn_finish(turn_id=turn.id, lease_token=claim.lease_token, status="completed")
    return turn


def search(client, q: str):
    return client.get(SEARCH, {"q": q})


def results(client, q: str) -> list[dict]:
    response = search(client, q)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_it_finds_names_and_message_text_with_a_snippet(owner_client):
    kitchen = conversation_create(name="Kitchen renovation")
    garden = conversation_create(name="Garden")
    turn = finished_turn(garden, "Which tomatoes grow in shade?", "Cherry tomatoes tolerate partial shade well.")

    by_name = results(owner_client, "renovating kitchens")  # stemmed: renovating ~ renovation
    by_text = results(owner_client, "tomato")

    assert [(r["conversation"]["id"], r["message_id"]) for r in by_name] == [(str(kitchen.id), None)]
    assert by_name[0]["conversation"]["name"] == "Kitchen renovation"
    answer = Message.objects.get(turn=turn, role=MessageRole.ASSISTANT)
    question = Message.objects.get(turn=turn, role=MessageRole.USER)
    [hit] = by_text  # one row per conversation: its best match, and how many matched
    assert hit["message_id"] in {str(answer.id), str(question.id)}
    assert hit["matches"] == 2
    assert "tomatoes" in hit["snippet"]
    assert "<" not in hit["snippet"]  # plain text: the page shows it as text
    assert [hit["snippet"][a:b].lower() for a, b in hit["highlights"]] == ["tomatoes"]


def test_a_word_in_seven_messages_is_one_row_with_its_count_and_marked_words(owner_client):
    capitals = conversation_create(name="Geography")
    for country in ("France", "Spain", "Italy"):
        finished_turn(capitals, f"What is the capital of {country}?", f"The capital of {country} is well known.")
    finished_turn(capitals, "And the capital of Peru?", "Lima.")
    other = conversation_create(name="Capital gains")

    found = results(owner_client, "capital")

    assert [r["conversation"]["id"] for r in found].count(str(capitals.id)) == 1
    row = next(r for r in found if r["conversation"]["id"] == str(capitals.id))
    assert row["matches"] == 7
    assert row["highlights"]
    assert {row["snippet"][a:b].lower() for a, b in row["highlights"]} == {"capital"}
    by_name = next(r for r in found if r["conversation"]["id"] == str(other.id))
    assert (by_name["message_id"], by_name["matches"]) == (None, 1)


def test_highlights_count_utf16_units_as_the_browser_does():
    marked = f"😀 the {MARK_START}capital{MARK_END} city"

    snippet, highlights = snippet_marks(marked)

    assert snippet == "😀 the capital city"
    assert highlights == [[7, 14]]  # the emoji counts 2


def test_it_searches_a_new_name_and_forgets_a_deleted_conversation(owner_client):
    conversation = conversation_create(name="Untitled errands")
    conversation_rename(conversation_id=conversation.id, name="Passport renewal")

    assert [r["conversation"]["id"] for r in results(owner_client, "passport")] == [str(conversation.id)]
    assert results(owner_client, "errands") == []
    conversation_delete(conversation_id=conversation.id)  # inaccessible at once, torn down later
    assert results(owner_client, "passport") == []


def test_it_titles_and_indexes_a_conversation_when_its_first_turn_ends(owner_client):
    conversation = conversation_create()
    finished_turn(conversation, "Compare heat pumps for an old house", "Air-to-water pumps suit radiators.")

    [found] = results(owner_client, "heat pumps")
    assert found["conversation"]["name"] == "Compare heat pumps for an old house"
    assert found["matches"] == 3  # the title, the question and the answer


HOSTILE = [
    '"kitchen unbalanced',
    "kitchen*",
    "NEAR(kitchen renovation)",
    "kitchen OR 1=1",
    "kitchen AND NOT garden",
    "-kitchen",
    "text:kitchen",
    "(kitchen",
    "kitchen'); DROP TABLE conversations_conversation; --",
    "^kitchen",
    "kitchen\\",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_it_reads_query_syntax_as_plain_words(owner_client, query):
    kitchen = conversation_create(name="Kitchen renovation")

    found = results(owner_client, query)

    assert [r["conversation"]["id"] for r in found] == [str(kitchen.id)]


def test_it_takes_a_query_of_1000_characters_and_refuses_1001(owner_client):
    conversation_create(name="Kitchen renovation")
    at_limit = ("kitchen " * 125)[:1000]

    assert len(results(owner_client, at_limit)) == 1
    response = search(owner_client, at_limit + "x")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_query"
    assert search(owner_client, "   ").status_code == 400


def test_it_uses_only_the_first_24_words_of_a_query(owner_client):
    conversation_create(name="Zebra crossing")
    words = [f"word{i}" for i in range(24)]

    assert results(owner_client, " ".join([*words, "zebra"])) == []  # the 25th word is not searched
    assert len(results(owner_client, " ".join([*words[:23], "zebra"]))) == 1


def test_it_returns_at_most_50_results(owner_client):
    for i in range(55):
        conversation_create(name=f"Budget {i}")

    assert len(results(owner_client, "budget")) == 50


def test_it_keeps_search_private(anonymous_client, owner):
    assert search(anonymous_client, "kitchen").status_code == 401


def test_a_message_that_matches_as_well_as_its_title_is_the_row_shown(owner_client):
    # A title is its first message's words: the row should open the conversation at the message.
    questions = []
    for i in range(8):  # ties were broken by random ids before: eight would all go right 1 time in 256
        turn = finished_turn(conversation_create(), f"Plan the garden shed number {i}", "Start with the floor.")
        questions.append(str(Message.objects.get(turn=turn, role=MessageRole.USER).id))

    hits = results(owner_client, "shed")

    assert sorted(hit["message_id"] for hit in hits) == sorted(questions)
