"""Memory services: facts added, remembered, updated and deleted, each limit at its edge."""

from __future__ import annotations

import re
import uuid

import pytest

from memory import selectors, services
from memory.errors import (
    DeleteItemsInvalid,
    FactConflict,
    FactInvalid,
    FactNotFound,
    FactTooLong,
    MemoryFull,
    WriteAbandoned,
)
from memory.models import Fact, FactState

pytestmark = [pytest.mark.django_db, pytest.mark.database]

UUID_LOWER = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def rows() -> list[tuple]:
    return list(Fact.objects.order_by("id").values_list("id", "content", "version", "state", "updated_at"))


def listed() -> list[str]:
    return [fact.content for fact in selectors.fact_list()]


def test_it_adds_a_fact_at_version_1_with_a_lowercase_uuid():
    fact = services.fact_create(content="The owner's cat is called Miso.")

    view = selectors.fact_view(fact)
    assert UUID_LOWER.match(view["id"])
    assert (view["content"], view["version"]) == ("The owner's cat is called Miso.", 1)
    assert view["created_at"].endswith("Z")
    assert listed() == ["The owner's cat is called Miso."]


def test_it_lists_active_facts_newest_first():
    for text in ("first", "second", "third"):
        services.fact_create(content=text)

    assert listed() == ["third", "second", "first"]


def test_it_keeps_tabs_and_line_breaks_as_given():
    text = "  Shopping list:\n\t- oat milk\n\t- rye bread  "

    fact = services.fact_create(content=text)

    assert Fact.objects.get(id=fact.id).content == text


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "must not be blank"),
        (" \n\t\u3000 ", "must not be blank"),
        ("a\x00b", "only tabs and line breaks may be control characters"),
        ("ring the \x07 bell", "only tabs and line breaks may be control characters"),
        ("escape \x1b[31m red", "only tabs and line breaks may be control characters"),
        ("C1 \x85 next line", "only tabs and line breaks may be control characters"),
        ("half a pair \ud83d", "lone UTF-16 surrogate"),
    ],
    ids=["empty", "blank", "nul", "bell", "escape", "c1-control", "lone-surrogate"],
)
def test_it_refuses_invalid_text_and_writes_nothing(content, why):
    services.fact_create(content="Already here.")
    before = rows()

    with pytest.raises(FactInvalid, match=why) as refused:
        services.fact_create(content=content)

    assert refused.value.code == "invalid_fact"
    assert refused.value.status == 400
    assert rows() == before


@pytest.mark.parametrize(
    "content",
    [
        "The invoice is invoice\u202egpj.exe",  # RLO: reads as "invoice.exe.jpg"
        "\u2066isolated\u2069 text",
        "left\u200eto\u200fright marks",
        "zero\u200bwidth space",
        "a joiner\u200dbetween letters",
        "\ufeffbyte order mark",
    ],
    ids=["rlo", "isolates", "direction-marks", "zero-width-space", "zwj-between-letters", "bom"],
)
def test_it_refuses_the_characters_a_name_refuses_and_writes_nothing(content):
    services.fact_create(content="Already here.")
    before = rows()

    with pytest.raises(FactInvalid, match="must not contain direction controls or invisible characters") as refused:
        services.fact_create(content=content)

    assert refused.value.code == "invalid_fact"
    assert rows() == before


def test_it_keeps_an_emoji_joined_by_zwj_as_names_do():
    text = "The owner codes 👩\u200d💻 and flies 🏳️\u200d🌈,\n\tboth on weekends."

    fact = services.fact_create(content=text)

    assert Fact.objects.get(id=fact.id).content == text


def test_an_update_refuses_them_too_and_keeps_the_fact():
    fact = services.fact_create(content="Miso is a cat.")

    with pytest.raises(FactInvalid, match="direction controls"):
        services.fact_update(fact_id=fact.id, content="Miso is a \u202etac.", version=1)

    assert Fact.objects.values_list("content", "version").get(id=fact.id) == ("Miso is a cat.", 1)


@pytest.mark.parametrize(
    ("content", "accepted"),
    [
        ("x" * 1000, True),
        ("x" * 1001, False),
        ("😀" * 500, True),  # 500 characters, 1,000 UTF-16 code units
        ("😀" * 500 + "x", False),
        ("é" * 1000, True),  # one code unit each, however many bytes
    ],
    ids=["1000-ascii", "1001-ascii", "1000-units-of-emoji", "1001-units", "1000-accented"],
)
def test_it_takes_1000_utf16_code_units_and_refuses_1001(content, accepted):
    if accepted:
        fact = services.fact_create(content=content)
        assert Fact.objects.get(id=fact.id).content == content
        return
    with pytest.raises(FactTooLong, match="at most 1,000 characters") as refused:
        services.fact_create(content=content)
    assert refused.value.code == "fact_too_long"
    assert not Fact.objects.exists()


def test_it_holds_200_active_facts_and_refuses_the_201st():
    Fact.objects.bulk_create(Fact(content=f"fact {i}") for i in range(199))
    services.fact_create(content="the 200th")

    with pytest.raises(MemoryFull, match="at most 200 facts") as refused:
        services.fact_create(content="the 201st")

    assert (refused.value.status, refused.value.code) == (429, "memory_full")
    assert Fact.objects.filter(state=FactState.ACTIVE).count() == 200
    assert not Fact.objects.filter(content="the 201st").exists()


def test_tombstones_do_not_count_toward_the_limit_and_stay():
    Fact.objects.bulk_create(Fact(content=f"fact {i}") for i in range(200))
    oldest = Fact.objects.order_by("created_at", "id").first()
    assert oldest is not None
    services.fact_delete(fact_id=oldest.id, version=1)

    services.fact_create(content="room again")

    assert Fact.objects.filter(state=FactState.ACTIVE).count() == 200
    assert Fact.objects.filter(state=FactState.DELETED).count() == 1
    with pytest.raises(MemoryFull):
        services.fact_create(content="and no more")


def test_an_update_compares_the_version_and_bumps_it():
    fact = services.fact_create(content="Lives in Lisbon.")

    updated = services.fact_update(fact_id=fact.id, content="Lives in Porto.", version=1)

    assert (updated.content, updated.version) == ("Lives in Porto.", 2)
    assert updated.updated_at > fact.updated_at
    assert updated.created_at == fact.created_at
    assert listed() == ["Lives in Porto."]


def test_a_stale_update_changes_nothing_and_says_what_is_current():
    fact = services.fact_create(content="Lives in Lisbon.")
    services.fact_update(fact_id=fact.id, content="Lives in Porto.", version=1)
    before = rows()

    with pytest.raises(FactConflict, match="at version 2, not 1") as stale:
        services.fact_update(fact_id=fact.id, content="Lives in Faro.", version=1)

    assert (stale.value.status, stale.value.code) == (409, "version_conflict")
    assert stale.value.current["content"] == "Lives in Porto."
    assert stale.value.current["version"] == 2
    assert stale.value.current["id"] == str(fact.id)
    assert rows() == before


def test_a_version_ahead_of_the_fact_is_stale_too():
    fact = services.fact_create(content="Lives in Lisbon.")

    with pytest.raises(FactConflict):
        services.fact_update(fact_id=fact.id, content="Lives in Faro.", version=7)

    assert Fact.objects.get(id=fact.id).version == 1


def test_updating_an_absent_or_deleted_fact_is_not_found_and_never_creates_one():
    deleted = services.fact_create(content="Gone soon.")
    services.fact_delete(fact_id=deleted.id, version=1)
    before = rows()

    for fact_id, version in ((uuid.uuid4(), 1), (deleted.id, 1), (deleted.id, 2)):
        with pytest.raises(FactNotFound):
            services.fact_update(fact_id=fact_id, content="Back again?", version=version)

    assert rows() == before
    assert listed() == []


def test_an_update_refuses_invalid_text_before_looking_at_the_fact():
    fact = services.fact_create(content="Keep me.")

    with pytest.raises(FactInvalid):
        services.fact_update(fact_id=fact.id, content="\x00", version=1)
    with pytest.raises(FactTooLong):
        services.fact_update(fact_id=fact.id, content="y" * 1001, version=1)

    assert Fact.objects.get(id=fact.id).content == "Keep me."
    assert Fact.objects.get(id=fact.id).version == 1


def test_deleting_leaves_a_content_free_tombstone_that_no_reader_sees():
    fact = services.fact_create(content="The door code is 4711.")

    assert services.fact_delete(fact_id=fact.id, version=1) is True

    tombstone = Fact.objects.get(id=fact.id)
    assert (tombstone.state, tombstone.content, tombstone.version) == (FactState.DELETED, "", 2)
    assert tombstone.deleted_at is not None
    assert listed() == []
    assert selectors.facts_recall(query="door code 4711") == []
    assert not Fact.objects.filter(content__contains="4711").exists()


def test_deleting_an_absent_valid_id_or_a_tombstone_again_is_done_already():
    fact = services.fact_create(content="Once.")
    services.fact_delete(fact_id=fact.id, version=1)
    before = rows()

    assert services.fact_delete(fact_id=uuid.uuid4(), version=1) is False
    assert services.fact_delete(fact_id=fact.id, version=1) is False  # a retry with the old version
    assert services.fact_delete(fact_id=fact.id, version=99) is False

    assert rows() == before


def test_a_stale_delete_keeps_the_fact():
    fact = services.fact_create(content="Lives in Lisbon.")
    services.fact_update(fact_id=fact.id, content="Lives in Porto.", version=1)

    with pytest.raises(FactConflict) as stale:
        services.fact_delete(fact_id=fact.id, version=1)

    assert stale.value.current["content"] == "Lives in Porto."
    assert listed() == ["Lives in Porto."]


def test_deleting_many_answers_each_fact_in_the_order_named():
    _kept, stale, gone = (services.fact_create(content=text) for text in ("Kept.", "Stale.", "Gone."))
    services.fact_update(fact_id=stale.id, content="Stale, changed.", version=1)
    unknown = uuid.uuid4()

    done = services.facts_delete(items=[(gone.id, 1), (unknown, 1), (stale.id, 1)])

    assert [(d.fact_id, d.outcome) for d in done] == [
        (gone.id, "deleted"),
        (unknown, "absent"),
        (stale.id, "version_conflict"),
    ]
    assert done[2].current is not None
    assert (done[2].current.content, done[2].current.version) == ("Stale, changed.", 2)
    assert listed() == ["Stale, changed.", "Kept."]
    assert Fact.objects.get(id=gone.id).content == ""


@pytest.mark.parametrize(("count", "why"), [(0, "at least one fact"), (201, "At most 200 facts")], ids=["none", "201"])
def test_deleting_many_refuses_none_or_too_many_and_deletes_nothing(count, why):
    Fact.objects.bulk_create(Fact(content=f"fact {i}") for i in range(200))
    ids = list(Fact.objects.values_list("id", flat=True))[:count] + [uuid.uuid4() for _ in range(count - 200)]
    before = rows()

    with pytest.raises(DeleteItemsInvalid, match=why):
        services.facts_delete(items=[(fact_id, 1) for fact_id in ids])

    assert rows() == before


def test_deleting_many_applies_the_items_in_the_order_named():
    fact = services.fact_create(content="Named three times.")

    done = services.facts_delete(items=[(fact.id, 2), (fact.id, 1), (fact.id, 1)])

    assert [d.outcome for d in done] == ["version_conflict", "deleted", "absent"]
    assert Fact.objects.get(id=fact.id).version == 2


def test_deleting_exactly_200_at_once_is_allowed():
    Fact.objects.bulk_create(Fact(content=f"fact {i}") for i in range(200))

    done = services.facts_delete(items=[(fact_id, 1) for fact_id in Fact.objects.values_list("id", flat=True)])

    assert [d.outcome for d in done] == ["deleted"] * 200
    assert listed() == []


def test_deleting_many_writes_nothing_when_told_not_to_proceed():
    fact = services.fact_create(content="Stays.")

    with pytest.raises(WriteAbandoned):
        services.facts_delete(items=[(fact.id, 1)], proceed=lambda: False)

    assert listed() == ["Stays."]


def test_remember_makes_the_same_id_for_the_same_call_and_writes_once():
    conversation_id = uuid.uuid4()
    fact_id = services.remember_id(conversation_id=conversation_id, tool_call_id="toolu_01")

    first, created = services.fact_remember(fact_id=fact_id, content="Prefers tea.")
    again, created_again = services.fact_remember(fact_id=fact_id, content="Prefers tea.")

    assert (created, created_again) == (True, False)
    assert first.id == again.id == fact_id
    assert str(fact_id) == str(uuid.uuid5(services.REMEMBER_NAMESPACE, f"{conversation_id}:toolu_01"))
    assert Fact.objects.count() == 1
    assert services.remember_id(conversation_id=conversation_id, tool_call_id="toolu_02") != fact_id
    assert services.remember_id(conversation_id=uuid.uuid4(), tool_call_id="toolu_01") != fact_id


def test_a_replayed_remember_never_brings_a_forgotten_fact_back():
    fact_id = services.remember_id(conversation_id=uuid.uuid4(), tool_call_id="call_7")
    services.fact_remember(fact_id=fact_id, content="The door code is 4711.")
    services.fact_delete(fact_id=fact_id, version=1)

    replayed, created = services.fact_remember(fact_id=fact_id, content="The door code is 4711.")

    assert created is False
    assert replayed.state == FactState.DELETED
    assert listed() == []
    assert Fact.objects.get(id=fact_id).content == ""


def test_a_replayed_remember_at_the_limit_returns_its_fact():
    fact_id = services.remember_id(conversation_id=uuid.uuid4(), tool_call_id="call_8")
    Fact.objects.bulk_create(Fact(content=f"fact {i}") for i in range(199))
    services.fact_remember(fact_id=fact_id, content="The 200th.")

    replayed, created = services.fact_remember(fact_id=fact_id, content="The 200th.")

    assert (created, replayed.content) == (False, "The 200th.")
    with pytest.raises(MemoryFull):
        services.fact_remember(fact_id=uuid.uuid4(), content="The 201st.")


@pytest.mark.django_db(transaction=True)  # no test transaction around: the service's own is seen
def test_a_tool_write_asks_to_proceed_inside_its_transaction_and_writes_nothing_when_told_not_to():
    fact = services.fact_create(content="Lives in Lisbon.")
    before = rows()
    asked: list[bool] = []
    from django.db import connection

    assert not connection.in_atomic_block

    def stop() -> bool:
        asked.append(connection.in_atomic_block)
        return False

    with pytest.raises(WriteAbandoned):
        services.fact_remember(fact_id=uuid.uuid4(), content="New.", proceed=stop)
    with pytest.raises(WriteAbandoned):
        services.fact_update(fact_id=fact.id, content="Lives in Porto.", version=1, proceed=stop)
    with pytest.raises(WriteAbandoned):
        services.fact_delete(fact_id=fact.id, version=1, proceed=stop)

    assert asked == [True, True, True]
    assert rows() == before
