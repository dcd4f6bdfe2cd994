"""Facts in the admin: listed for the owner, tombstones shown as such, nothing changeable."""

from __future__ import annotations

from memory import services
from memory.models import Fact, FactState

CHANGELIST = "/admin/memory/fact/"


def test_it_lists_facts_and_shows_tombstones_as_such(owner_client):
    services.fact_create(content="Prefers tea.")
    gone = services.fact_create(content="The door code is 4711.")
    services.fact_delete(fact_id=gone.id, version=1)

    response = owner_client.get(CHANGELIST)

    assert response.status_code == 200
    assert b"Prefers tea." in response.content
    assert b"(deleted: a tombstone without content)" in response.content
    assert b"4711" not in response.content


def test_it_shows_a_fact_without_letting_the_owner_change_add_or_delete_it(owner_client):
    fact = services.fact_create(content="Prefers tea.")

    page = owner_client.get(f"{CHANGELIST}{fact.id}/change/")
    changed = owner_client.post(f"{CHANGELIST}{fact.id}/change/", {"content": "Prefers coffee.", "version": 1})
    deleted = owner_client.post(f"{CHANGELIST}{fact.id}/delete/", {"post": "yes"})
    added = owner_client.post(f"{CHANGELIST}add/", {"content": "Added.", "version": 1, "state": "active"})

    assert page.status_code == 200
    assert b"Prefers tea." in page.content
    assert b'name="_save"' not in page.content
    assert (changed.status_code, deleted.status_code, added.status_code) == (403, 403, 403)
    assert list(Fact.objects.values_list("content", "version", "state")) == [("Prefers tea.", 1, FactState.ACTIVE)]
