"""Concurrent writes on real threads, each with its own database connection.

On PostgreSQL both writers are held inside their transactions until each has begun, so
their statements really overlap; on SQLite the second writer waits for the first one's
write lock (transactions begin IMMEDIATE), which is the serialisation the code relies on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection

from flarebot.core.rows import transaction_lock
from memory import services
from memory.errors import FactConflict, MemoryFull
from memory.models import Fact, FactState
from tests.support.threads import in_threads, postgres_lock_awaited

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]

POSTGRESQL = connection.vendor == "postgresql"


def both_inside() -> Callable[[], bool]:
    """A `proceed` that lets each writer go on only once both are inside their transactions."""
    barrier = threading.Barrier(2, timeout=30)

    def proceed() -> bool:
        if POSTGRESQL:
            barrier.wait()
        return True

    return proceed


def test_two_edits_from_the_same_version_one_wins_and_the_other_conflicts():
    fact = services.fact_create(content="Lives in Lisbon.")
    proceed = both_inside()

    outcomes = in_threads(
        lambda: services.fact_update(fact_id=fact.id, content="Lives in Porto.", version=1, proceed=proceed),
        lambda: services.fact_update(fact_id=fact.id, content="Lives in Faro.", version=1, proceed=proceed),
    )

    winners = [o for o in outcomes if isinstance(o, Fact)]
    losers = [o for o in outcomes if isinstance(o, FactConflict)]
    assert (len(winners), len(losers)) == (1, 1), outcomes
    stored = Fact.objects.get(id=fact.id)
    assert (stored.content, stored.version) == (winners[0].content, 2)
    assert losers[0].current == {**losers[0].current, "content": stored.content, "version": 2}


def test_an_edit_and_a_delete_from_the_same_version_one_wins():
    fact = services.fact_create(content="Lives in Lisbon.")
    proceed = both_inside()

    outcomes = in_threads(
        lambda: services.fact_update(fact_id=fact.id, content="Lives in Porto.", version=1, proceed=proceed),
        lambda: services.fact_delete(fact_id=fact.id, version=1, proceed=proceed),
    )

    stored = Fact.objects.get(id=fact.id)
    if isinstance(outcomes[0], Fact):  # the edit won: the delete saw version 2
        assert isinstance(outcomes[1], FactConflict)
        assert (stored.state, stored.content, stored.version) == (FactState.ACTIVE, "Lives in Porto.", 2)
    else:  # the delete won: the edit found no active fact and created none
        assert outcomes[1] is True
        assert type(outcomes[0]).__name__ == "FactNotFound"
        assert (stored.state, stored.content, stored.version) == (FactState.DELETED, "", 2)
    assert Fact.objects.count() == 1


def test_two_bulk_deletes_of_the_same_facts_in_opposite_orders_both_finish_and_delete_each_once():
    facts = [services.fact_create(content=f"Fact {i}.") for i in range(20)]
    named = [(fact.id, 1) for fact in facts]
    proceed = both_inside()

    outcomes = in_threads(
        lambda: services.facts_delete(items=named, proceed=proceed),
        lambda: services.facts_delete(items=named[::-1], proceed=proceed),
    )

    # Rows are locked in id order whatever the order named: no deadlock, no error.
    assert all(isinstance(outcome, list) for outcome in outcomes), outcomes
    first, second = ({d.fact_id: d.outcome for d in outcome} for outcome in outcomes)
    for fact in facts:
        assert sorted([first[fact.id], second[fact.id]]) == ["absent", "deleted"]
    assert Fact.objects.filter(state=FactState.ACTIVE).count() == 0
    assert set(Fact.objects.values_list("version", flat=True)) == {2}


def test_a_bulk_delete_and_an_edit_from_the_same_version_one_wins():
    fact = services.fact_create(content="Lives in Lisbon.")
    other = services.fact_create(content="Prefers tea.")
    proceed = both_inside()

    outcomes = in_threads(
        lambda: services.fact_update(fact_id=fact.id, content="Lives in Porto.", version=1, proceed=proceed),
        lambda: services.facts_delete(items=[(other.id, 1), (fact.id, 1)], proceed=proceed),
    )

    edited, deleted = outcomes
    stored = Fact.objects.get(id=fact.id)
    assert deleted[0].outcome == "deleted"
    if isinstance(edited, Fact):  # the edit won: the bulk delete kept the fact and says so
        assert deleted[1].outcome == "version_conflict"
        assert deleted[1].current is not None
        assert deleted[1].current.content == "Lives in Porto."
        assert (stored.state, stored.content, stored.version) == (FactState.ACTIVE, "Lives in Porto.", 2)
    else:  # the delete won: the edit found no active fact and created none
        assert type(edited).__name__ == "FactNotFound"
        assert deleted[1].outcome == "deleted"
        assert (stored.state, stored.content, stored.version) == (FactState.DELETED, "", 2)


def test_two_replays_of_one_remember_store_one_fact():
    fact_id = services.remember_id(conversation_id=Fact().id, tool_call_id="call_twice")

    outcomes = in_threads(
        lambda: services.fact_remember(fact_id=fact_id, content="Prefers tea."),
        lambda: services.fact_remember(fact_id=fact_id, content="Prefers tea."),
    )

    assert sorted(created for _, created in outcomes) == [False, True], outcomes
    assert list(Fact.objects.values_list("id", "content")) == [(fact_id, "Prefers tea.")]


def test_a_second_add_waits_for_the_first_and_the_limit_holds():
    Fact.objects.bulk_create(Fact(content=f"fact {i}") for i in range(199))
    holding = threading.Event()
    release = threading.Event()

    def first() -> Fact:
        from django.db import transaction

        with transaction.atomic():
            transaction_lock(services.FACTS_ADD_LOCK)
            fact = Fact.objects.create(content="the 200th")
            holding.set()
            assert release.wait(30)
            return fact

    def second() -> Fact:
        assert holding.wait(30)
        return services.fact_create(content="the 201st")

    def observer() -> None:
        assert holding.wait(30)
        # The second add must be waiting for the add lock, not counting on its own.
        if POSTGRESQL and not postgres_lock_awaited("advisory"):
            release.set()
            raise AssertionError("the second add did not wait for the add lock")
        release.set()

    outcomes = in_threads(first, second, observer)

    assert isinstance(outcomes[0], Fact)
    assert isinstance(outcomes[1], MemoryFull), outcomes
    assert outcomes[2] is None
    assert Fact.objects.filter(state=FactState.ACTIVE).count() == 200
