"""POST /api/memories/delete/: many facts deleted in one call, each at its version (PROTOCOL.md "Memory").

Each named fact answers its own outcome; a stale one stays with its current text while the
others go. A refused request (a bad shape, too many facts, no session) deletes nothing.
"""

from __future__ import annotations

import json
import uuid

import pytest
import yaml
from django.test import Client

from memory import services
from memory.models import Fact, FactState
from tests.memory.test_api import FOREIGN_ORIGIN, LIST, assert_error, assert_fact, patch, stored

pytestmark = pytest.mark.database

DELETE_MANY = "/api/memories/delete/"


def delete_many(client: Client, body: object, **kwargs):
    return client.post(DELETE_MANY, json.dumps(body), content_type="application/json", **kwargs)


def items(*facts: Fact) -> dict[str, list[dict[str, object]]]:
    return {"items": [{"id": str(fact.id), "version": fact.version} for fact in facts]}


def listed(client: Client) -> list[str]:
    return [fact["content"] for fact in client.get(LIST).json()["memories"]]


@pytest.fixture
def facts(owner) -> list[Fact]:
    return [services.fact_create(content=text) for text in ("Lives in Lisbon.", "Prefers tea.", "Has a cat.")]


def test_it_deletes_the_named_facts_leaving_tombstones_and_answers_each_in_order(owner_client, facts):
    lisbon, _tea, cat = facts

    response = delete_many(owner_client, items(cat, lisbon))

    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    assert response.json() == {
        "results": [
            {"id": str(cat.id), "outcome": "deleted", "current": None},
            {"id": str(lisbon.id), "outcome": "deleted", "current": None},
        ]
    }
    assert listed(owner_client) == ["Prefers tea."]
    for fact in (cat, lisbon):
        tombstone = Fact.objects.get(id=fact.id)
        assert (tombstone.state, tombstone.content, tombstone.version) == (FactState.DELETED, "", 2)
        assert tombstone.deleted_at is not None


def test_a_stale_fact_stays_with_its_current_text_while_the_others_go(owner_client, facts):
    lisbon, tea, cat = facts
    current = patch(owner_client, tea.id, {"content": "Prefers green tea.", "version": 1}).json()

    response = delete_many(owner_client, items(lisbon, tea, cat))  # tea named at version 1, now 2

    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [(r["id"], r["outcome"]) for r in results] == [
        (str(lisbon.id), "deleted"),
        (str(tea.id), "version_conflict"),
        (str(cat.id), "deleted"),
    ]
    assert_fact(results[1]["current"], content="Prefers green tea.", version=2)
    assert results[1]["current"] == current
    assert listed(owner_client) == ["Prefers green tea."]
    assert Fact.objects.get(id=tea.id).version == 2


def test_an_unknown_or_already_deleted_fact_is_absent_and_changes_nothing(owner_client, facts):
    _, tea, _ = facts
    services.fact_delete(fact_id=tea.id, version=1)
    unknown = uuid.uuid4()
    before = stored()

    body = {"items": [{"id": str(unknown), "version": 1}, {"id": str(tea.id), "version": 1}]}
    response = delete_many(owner_client, body)

    assert response.status_code == 200, response.content
    assert response.json() == {
        "results": [
            {"id": str(unknown), "outcome": "absent", "current": None},
            {"id": str(tea.id), "outcome": "absent", "current": None},
        ]
    }
    assert stored() == before
    assert not Fact.objects.filter(id=unknown).exists()


def test_it_deletes_exactly_200_facts_in_one_call(owner_client):
    Fact.objects.bulk_create(Fact(content=f"Fact number {i}.") for i in range(services.MAX_FACTS))
    every = list(Fact.objects.all())
    assert len(every) == 200

    response = delete_many(owner_client, items(*every))

    assert response.status_code == 200, response.content
    assert [r["outcome"] for r in response.json()["results"]] == ["deleted"] * 200
    assert listed(owner_client) == []
    assert Fact.objects.filter(state=FactState.DELETED).count() == 200


def test_it_refuses_201_facts_in_one_call_and_deletes_none(owner_client):
    Fact.objects.bulk_create(Fact(content=f"Fact number {i}.") for i in range(services.MAX_FACTS))
    body = items(*Fact.objects.all())
    body["items"].append({"id": str(uuid.uuid4()), "version": 1})
    before = stored()

    error = assert_error(delete_many(owner_client, body), 400, "invalid")

    assert error["message"] == "items: at most 200 facts at once."
    assert error["fields"] == {"items": ["at most 200 facts at once."]}
    assert stored() == before


ID = "6f1e2b7c-8d9a-4b3c-9e1f-2a3b4c5d6e7f"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "items: This field is required."),
        ([], "The body must be a JSON object."),
        ({"items": None}, "items: This field may not be null."),
        ({"items": "all"}, 'items: must be a list of objects with "id" and "version".'),
        ({"items": {"id": ID, "version": 1}}, 'items: must be a list of objects with "id" and "version".'),
        ({"items": []}, "items: name at least one fact."),
        ({"items": [ID]}, 'items[0]: must be an object with "id" and "version".'),
        ({"items": [{"id": ID}]}, "items[0].version: This field is required."),
        ({"items": [{"version": 1}]}, "items[0].id: This field is required."),
        ({"items": [{"id": ID, "version": "1"}]}, "items[0].version: a whole number from 1 to 2147483647."),
        ({"items": [{"id": ID, "version": 0}]}, "items[0].version: a whole number from 1 to 2147483647."),
        ({"items": [{"id": ID, "version": True}]}, "items[0].version: a whole number from 1 to 2147483647."),
        ({"items": [{"id": ID, "version": 1.5}]}, "items[0].version: a whole number from 1 to 2147483647."),
        ({"items": [{"id": ID, "version": 2**31}]}, "items[0].version: a whole number from 1 to 2147483647."),
        ({"items": [{"id": ID.upper(), "version": 1}]}, "items[0].id: not a valid fact id (a lowercase UUID)."),
        ({"items": [{"id": "not-an-id", "version": 1}]}, "items[0].id: not a valid fact id (a lowercase UUID)."),
        ({"items": [{"id": 42, "version": 1}]}, "items[0].id: Must be a string."),
        ({"items": [{"id": ID, "version": 1, "content": ""}]}, "items[0].content: This field is not allowed."),
        ({"items": [{"id": ID, "version": 1}], "all": True}, "all: This field is not allowed."),
    ],
    ids=[
        "no-items",
        "array-body",
        "null-items",
        "string-items",
        "object-items",
        "empty-items",
        "bare-id",
        "no-version",
        "no-id",
        "string-version",
        "zero-version",
        "boolean-version",
        "fraction-version",
        "too-large-version",
        "uppercase-id",
        "malformed-id",
        "number-id",
        "extra-item-field",
        "extra-body-field",
    ],
)
def test_a_bad_body_is_400_with_the_field_named_and_deletes_nothing(owner_client, facts, body, message):
    before = stored()

    error = assert_error(delete_many(owner_client, body), 400, "invalid")

    assert error["message"] == message
    assert stored() == before


def test_one_bad_item_among_good_ones_deletes_none_of_them(owner_client, facts):
    body = items(*facts)
    body["items"].insert(1, {"id": str(uuid.uuid4()), "version": -1})
    before = stored()

    error = assert_error(delete_many(owner_client, body), 400, "invalid")

    assert error["fields"] == {"items[1].version": ["a whole number from 1 to 2147483647."]}
    assert stored() == before


def test_a_fact_named_twice_is_deleted_once_and_the_repeat_is_absent(owner_client, facts):
    lisbon, tea, _ = facts
    body = {"items": [*items(lisbon, tea)["items"], {"id": str(lisbon.id), "version": 1}]}

    response = delete_many(owner_client, body)

    assert response.status_code == 200, response.content
    assert [(r["id"], r["outcome"]) for r in response.json()["results"]] == [
        (str(lisbon.id), "deleted"),
        (str(tea.id), "deleted"),
        (str(lisbon.id), "absent"),
    ]
    assert listed(owner_client) == ["Has a cat."]
    assert Fact.objects.get(id=lisbon.id).version == 2


def test_a_body_that_is_not_json_is_415_and_deletes_nothing(owner_client, facts):
    before = stored()

    response = owner_client.post(DELETE_MANY, "items=all", content_type="application/x-www-form-urlencoded")

    assert_error(response, 415, "unsupported_media_type")
    assert stored() == before


@pytest.mark.parametrize("method", ["get", "delete", "patch", "put"])
def test_only_post_is_a_method_here(owner_client, facts, method):
    before = stored()

    if method == "get":
        response = owner_client.get(DELETE_MANY)
    else:
        response = getattr(owner_client, method)(DELETE_MANY, json.dumps(items(*facts)), "application/json")

    assert_error(response, 405, "method_not_allowed")
    assert stored() == before


def test_it_requires_a_signed_in_owner(anonymous_client, facts):
    before = stored()

    response = delete_many(anonymous_client, items(*facts))

    assert_error(response, 401, "not_authenticated")
    assert b"Lisbon" not in response.content
    assert stored() == before


def test_it_refuses_a_foreign_origin(owner_client, facts):
    before = stored()

    response = delete_many(owner_client, items(*facts), headers={"Origin": FOREIGN_ORIGIN})

    assert_error(response, 403, "origin_refused")
    assert stored() == before


def test_the_openapi_document_says_what_this_call_takes_and_answers(owner_client):
    document = yaml.safe_load(owner_client.get("/api/schema/").content)
    operation = document["paths"][DELETE_MANY]["post"]

    def resolve(schema: dict) -> dict:
        name = schema.get("$ref", "").rsplit("/", 1)[-1]
        return document["components"]["schemas"][name] if name else schema

    body = resolve(operation["requestBody"]["content"]["application/json"]["schema"])
    listed_items = body["properties"]["items"]
    item = resolve(listed_items["items"])
    answer = resolve(operation["responses"]["200"]["content"]["application/json"]["schema"])
    result = resolve(answer["properties"]["results"]["items"])
    assert set(document["paths"][DELETE_MANY]) == {"post"}
    assert (body["required"], body["additionalProperties"]) == (["items"], False)
    assert (listed_items["minItems"], listed_items["maxItems"]) == (1, services.MAX_DELETE)
    assert (sorted(item["required"]), item["additionalProperties"]) == (["id", "version"], False)
    assert item["properties"]["id"]["pattern"] == "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
    assert item["properties"]["version"] == {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}
    assert result["properties"]["outcome"]["enum"] == ["deleted", "absent", "version_conflict"]
    assert result["properties"]["current"]["nullable"] is True
    assert {"200", "400", "401", "403", "413", "415", "503"} <= set(operation["responses"])
