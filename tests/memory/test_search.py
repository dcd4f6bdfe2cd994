"""Memory search on the database: words OR-combined, stemmed and ranked; operators are just words.

Every hostile query runs through `recall` (the tool's selector) and the per-turn selection
on the real database of the run (FTS5 on SQLite, tsvector on PostgreSQL); none may raise,
and what it finds is exactly what its plain words find.
"""

from __future__ import annotations

import pytest
from django.db import connection

from memory import selectors, services
from memory.errors import QueryTooLong
from memory.models import Fact
from memory.query import STOP_WORDS, query_tokens
from memory.sql import fts5_match

pytestmark = [pytest.mark.django_db, pytest.mark.database]

RIVER = "The owner runs near the river in Porto every morning."
COLOUR = "Favourite colour: blue, like the sea."
EDITOR = 'Uses vim and "never" emacs (a joke: NOT really).'
CODE = "The door code is 4711*"


@pytest.fixture
def facts() -> dict[str, str]:
    """Four facts, by name; returns their ids."""
    return {
        name: str(services.fact_create(content=text).id)
        for name, text in (("river", RIVER), ("colour", COLOUR), ("editor", EDITOR), ("code", CODE))
    }


def found(query: str) -> list[str]:
    return [fact["content"] for fact in selectors.facts_recall(query=query)]


def selected(text: str) -> list[str]:
    return [fact["content"] for fact in selectors.facts_relevant(text=text)]


HOSTILE = [
    ('"river', [RIVER]),
    ('river"', [RIVER]),
    ('"', []),
    ('""', []),
    ('"""river', [RIVER]),
    ("*", []),
    ("river*", [RIVER]),
    ("4711*", [CODE]),
    ("NEAR", [RIVER]),  # an ordinary word here, and the river fact holds it
    ("NEAR(vim emacs)", [RIVER, EDITOR]),
    ("NEAR(river porto, 1)", [RIVER]),
    ("vim NEAR/2 emacs", [RIVER, EDITOR]),
    ("river OR", [RIVER]),
    ("OR", []),
    ("AND", []),
    ("NOT", []),
    ("NOT river", [RIVER]),
    ("river AND NOT porto", [RIVER]),
    ("-river", [RIVER]),
    ("- -", []),
    ("content:river", [RIVER]),
    ("fact_id:river", [RIVER]),
    (":", []),
    ("(river", [RIVER]),
    ("river)", [RIVER]),
    ("()", []),
    ("((((", []),
    ("^river", [RIVER]),
    ("river + porto", [RIVER]),
    ("{content}: river", [RIVER]),
    ("'; DROP TABLE memory_fact; --", []),
    ("%river%", [RIVER]),
    ("_", []),
    ("\\", []),
    ("river & sea | !blue", [RIVER, COLOUR]),
    ("river <-> porto", [RIVER]),
    ("river:*", [RIVER]),
    ("blue:A", [COLOUR]),
]


@pytest.mark.parametrize(("query", "expected"), HOSTILE, ids=[q for q, _ in HOSTILE])
def test_operators_quotes_and_punctuation_are_only_words(facts, query, expected):
    assert sorted(found(query)) == sorted(expected)
    assert sorted(selected(query)) == sorted(expected)
    assert Fact.objects.count() == 4  # nothing ran but the search


def test_a_query_finds_facts_by_any_of_its_words():
    services.fact_create(content=RIVER)
    services.fact_create(content=COLOUR)

    assert sorted(found("porto blue")) == sorted([RIVER, COLOUR])
    assert found("porto lisbon") == [RIVER]
    assert found("lisbon") == []


def test_it_stems_english_words(facts):
    assert found("running") == [RIVER]
    assert found("rivers") == [RIVER]
    assert found("colours") == [COLOUR]
    assert found("mornings") == [RIVER]


def test_stop_words_alone_find_nothing(facts):
    assert found("the and of in is a like") == [COLOUR]  # "like" is not a stop word
    assert found("The and of in is a") == []
    assert selected("Who are you? What is this?") == []


def test_the_best_match_comes_first_and_at_most_8_are_returned():
    for i in range(12):
        services.fact_create(content=f"Note {i} about the garden.")
    best = services.fact_create(content="Garden hose, garden gloves and garden shears live in the garden shed.")

    results = selectors.facts_recall(query="garden shed")

    assert len(results) == 8
    assert results[0]["id"] == str(best.id)
    assert all(set(r) == {"id", "content", "version"} for r in results)


def test_the_24th_word_counts_and_the_25th_does_not():
    services.fact_create(content=RIVER)
    filler = [f"zz{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(24)]

    twenty_four = " ".join([*filler[:23], "river"])
    twenty_five = " ".join([*filler[:24], "river"])

    assert len(query_tokens(twenty_four)) == 24
    assert query_tokens(twenty_five) == filler
    assert found(twenty_four) == [RIVER]
    assert found(twenty_five) == []
    assert selected(twenty_four) == [RIVER]
    assert selected(twenty_five) == []


def test_stop_words_and_repeated_words_do_not_use_up_the_24():
    services.fact_create(content=RIVER)
    query = " ".join(["the", "and", "zz", "Zz", "ZZ"] * 30 + ["river"])

    assert query_tokens(query) == ["zz", "river"]
    assert found(query) == [RIVER]


def test_recall_takes_1000_characters_and_refuses_1001():
    services.fact_create(content=RIVER)
    at_limit = "x" * 994 + " river"  # 1,000
    over = "x" * 995 + " river"  # 1,001
    emoji_at_limit = "😀" * 497 + " river"  # 994 + 6 UTF-16 code units

    assert found(at_limit) == [RIVER]
    assert found(emoji_at_limit) == [RIVER]
    with pytest.raises(QueryTooLong, match="at most 1,000 characters") as refused:
        found(over)
    assert refused.value.code == "query_too_long"
    with pytest.raises(QueryTooLong):
        found("😀" * 497 + " rivers")


def test_the_turn_selection_reads_the_first_1000_characters_and_never_refuses():
    services.fact_create(content=RIVER)

    assert selected("x" * 994 + " river") == [RIVER]
    assert selected("x" * 995 + " river") == []  # the word is cut to "rive"
    assert selected("x" * 995 + " porto " + "y" * 30_000) == []
    assert selected("😀" * 497 + " river") == [RIVER]
    assert selected("😀" * 497 + " rivers and more") == [RIVER]  # cut at 1,000 within "rivers"


def test_a_very_long_word_is_just_a_word_that_matches_nothing():
    services.fact_create(content=RIVER)

    assert found("é" * 999 + " ") == []
    assert found("ж" * 1000) == []


def test_search_follows_every_write_at_once():
    fact = services.fact_create(content="Lives in Lisbon.")
    assert found("lisbon") == ["Lives in Lisbon."]

    services.fact_update(fact_id=fact.id, content="Lives in Porto.", version=1)
    assert found("lisbon") == []
    assert found("porto") == ["Lives in Porto."]

    services.fact_delete(fact_id=fact.id, version=2)
    assert found("porto") == []
    assert found("lisbon") == []


def test_diacritics_and_non_latin_words_are_words():
    services.fact_create(content="Café com leite em São Paulo.")
    services.fact_create(content="Любимый цвет: синий.")

    assert found("são") == ["Café com leite em São Paulo."]
    assert found("синий") == ["Любимый цвет: синий."]


def test_the_fts5_query_quotes_every_token():
    assert fts5_match(["river", "near"]) == '"river" OR "near"'
    assert fts5_match(['a"b']) == '"a""b"'  # never produced by the tokenizer, quoted all the same


def test_the_stop_words_hold_the_query_operators_that_are_english_words():
    assert {"and", "or", "not"} <= STOP_WORDS
    assert "near" not in STOP_WORDS


# What each database's index holds of a fact: the FTS5 table's rows on SQLite, the words
# of the generated tsvector column on PostgreSQL (a tombstone's is empty).
INDEXED_SQL = {
    "sqlite": "SELECT fact_id, content FROM memory_fact_search ORDER BY content",
    "postgresql": "SELECT replace(id::text, '-', ''), search::text FROM memory_fact"
    " WHERE search != ''::tsvector ORDER BY search::text",
}


def test_the_search_index_holds_only_active_facts():
    kept = services.fact_create(content="Kept.")
    gone = services.fact_create(content="Gone.")
    services.fact_delete(fact_id=gone.id, version=1)

    with connection.cursor() as cursor:
        cursor.execute(INDEXED_SQL[connection.vendor])
        indexed = cursor.fetchall()

    expected = {"sqlite": "Kept.", "postgresql": "'kept':1"}[connection.vendor]
    assert indexed == [(kept.id.hex, expected)]
