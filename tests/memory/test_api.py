"""The memory JSON API, exactly as PROTOCOL.md "Memory" describes it; bad input changes nothing."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.test import Client

from memory import services
from memory.models import Fact, FactState

LIST = "/api/memories/"
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
UUID_LOWER = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
FOREIGN_ORIGIN = "https://attacker.example"


def detail(fact_id: object) -> str:
    return f"{LIST}{fact_id}/"


def post(client: Client, body: object, **kwargs):
    return client.post(LIST, json.dumps(body), content_type="application/json", **kwargs)


def patch(client: Client, fact_id: object, body: object, **kwargs):
    return client.patch(detail(fact_id), json.dumps(body), content_type="application/json", **kwargs)


def delete(client: Client, fact_id: object, version: object = None, **kwargs):
    query = "" if version is None else f"?version={version}"
    return client.delete(detail(fact_id) + query, **kwargs)


def assert_error(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert set(body) == {"error"}
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]


def stored() -> list[tuple]:
    return list(Fact.objects.order_by("id").values_list("id", "content", "version", "state", "updated_at"))


def assert_fact(body: dict, *, content: str, version: int) -> None:
    assert set(body) == {"id", "content", "version", "created_at", "updated_at"}
    assert UUID_LOWER.match(body["id"])
    assert (body["content"], body["version"]) == (content, version)
    assert ISO_Z.match(body["created_at"])
    assert ISO_Z.match(body["updated_at"])


@pytest.fixture
def fact(owner) -> Fact:
    return services.fact_create(content="Lives in Lisbon.")


# --- list and add ---------------------------------------------------------------------


def test_it_lists_no_facts_at_first(owner_client):
    response = owner_client.get(LIST)

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response.json() == {"memories": []}


def test_it_adds_a_fact_and_lists_it(owner_client):
    response = post(owner_client, {"content": "Prefers tea to coffee."})

    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert_fact(body, content="Prefers tea to coffee.", version=1)
    assert owner_client.get(LIST).json() == {"memories": [body]}
    assert Fact.objects.get(id=body["id"]).content == "Prefers tea to coffee."


def test_it_lists_newest_first_and_never_a_tombstone(owner_client):
    ids = [post(owner_client, {"content": f"fact {i}"}).json()["id"] for i in range(3)]
    delete(owner_client, ids[1], 1)

    listed = owner_client.get(LIST).json()["memories"]

    assert [f["content"] for f in listed] == ["fact 2", "fact 0"]
    assert b'"content": ""' not in owner_client.get(LIST).content


@pytest.mark.parametrize(
    ("body", "code", "why"),
    [
        ({}, "invalid", "content"),
        ({"content": 42}, "invalid", "content: Must be a string."),
        ({"content": None}, "invalid", "content"),
        ({"content": "ok", "version": 1}, "invalid", "version: This field is not allowed."),
        ({"content": "ok", "id": str(uuid.uuid4())}, "invalid", "id: This field is not allowed."),
        (["content"], "invalid", "The body must be a JSON object."),
        ({"content": ""}, "invalid_fact", "must not be blank"),
        ({"content": " \n\t "}, "invalid_fact", "must not be blank"),
        ({"content": "nul \x00 inside"}, "invalid_fact", "only tabs and line breaks"),
        ({"content": "bell \x07"}, "invalid_fact", "only tabs and line breaks"),
        ({"content": "invoice\u202egpj.exe"}, "invalid_fact", "direction controls or invisible characters"),
        ({"content": "x" * 1001}, "fact_too_long", "at most 1,000 characters"),
        ({"content": "😀" * 500 + "x"}, "fact_too_long", "at most 1,000 characters"),
    ],
    ids=[
        "missing",
        "number",
        "null",
        "extra-version",
        "extra-id",
        "array",
        "empty",
        "blank",
        "nul",
        "bell",
        "right-to-left-override",
        "1001-units",
        "1001-units-emoji",
    ],
)
def test_it_refuses_an_invalid_fact_and_stores_nothing(owner_client, fact, body, code, why):
    before = stored()

    error = assert_error(post(owner_client, body), 400, code)

    assert why in error["message"]
    assert stored() == before


def test_it_refuses_a_lone_surrogate_with_400(owner_client, fact):
    before = stored()

    response = owner_client.post(LIST, '{"content": "half \\ud83d a pair"}', content_type="application/json")

    # Refused where every body is parsed (flarebot.core.json_input), before the fact rules.
    assert_error(response, 400, "invalid_json")
    assert stored() == before


def test_it_takes_a_fact_of_exactly_1000_utf16_code_units(owner_client):
    response = post(owner_client, {"content": "😀" * 499 + "xy"})

    assert response.status_code == 201, response.content


def test_it_refuses_the_201st_fact_with_429(owner_client):
    Fact.objects.bulk_create(Fact(content=f"fact {i}") for i in range(199))
    assert post(owner_client, {"content": "the 200th"}).status_code == 201
    before = stored()

    error = assert_error(post(owner_client, {"content": "the 201st"}), 429, "memory_full")

    assert "at most 200 facts" in error["message"]
    assert stored() == before


# --- edit ---------------------------------------------------------------------------------


def test_it_edits_a_fact_at_its_version(owner_client, fact):
    response = patch(owner_client, fact.id, {"content": "Lives in Porto.", "version": 1})

    assert response.status_code == 200, response.content
    body = response.json()
    assert_fact(body, content="Lives in Porto.", version=2)
    assert body["id"] == str(fact.id)
    assert body["updated_at"] >= body["created_at"]
    assert owner_client.get(LIST).json()["memories"] == [body]


def test_a_stale_edit_is_409_with_the_current_fact_and_changes_nothing(owner_client, fact):
    current = patch(owner_client, fact.id, {"content": "Lives in Porto.", "version": 1}).json()
    before = stored()

    error = assert_error(patch(owner_client, fact.id, {"content": "Lives in Faro.", "version": 1}), 409)

    assert error["code"] == "version_conflict"
    assert error["current"] == current
    assert stored() == before


def test_editing_an_absent_or_deleted_fact_is_404_and_never_creates_one(owner_client, fact):
    delete(owner_client, fact.id, 1)
    before = stored()

    for fact_id, version in ((uuid.uuid4(), 1), (fact.id, 1), (fact.id, 2)):
        assert_error(patch(owner_client, fact_id, {"content": "Back?", "version": version}), 404, "not_found")

    assert stored() == before
    assert owner_client.get(LIST).json() == {"memories": []}


BAD_IDS = [
    "not-a-uuid",
    "12345",
    "{id}",
    "00000000000000000000000000000000",
    "urn:uuid:6f1e2b7c-8d9a-4b3c-9e1f-2a3b4c5d6e7f",
    "6F1E2B7C-8D9A-4B3C-9E1F-2A3B4C5D6E7F",
    "6f1e2b7c-8d9a-4b3c-9e1f-2a3b4c5d6e7",
    "6f1e2b7c-8d9a-4b3c-9e1f-2a3b4c5d6e7f0",
]


@pytest.mark.parametrize("bad_id", BAD_IDS)
def test_a_malformed_or_uppercase_id_is_400_and_writes_nothing(owner_client, fact, bad_id):
    before = stored()

    assert_error(patch(owner_client, bad_id, {"content": "x", "version": 1}), 400, "invalid_id")
    assert_error(delete(owner_client, bad_id, 1), 400, "invalid_id")

    assert stored() == before


def test_the_uppercase_form_of_an_existing_id_is_400(owner_client, fact):
    upper = str(fact.id).upper()

    assert_error(patch(owner_client, upper, {"content": "x", "version": 1}), 400, "invalid_id")
    assert_error(delete(owner_client, upper, 1), 400, "invalid_id")

    assert Fact.objects.get(id=fact.id).state == FactState.ACTIVE


@pytest.mark.parametrize(
    "body",
    [
        {"content": "Lives in Porto."},
        {"content": "Lives in Porto.", "version": None},
        {"content": "Lives in Porto.", "version": "1"},
        {"content": "Lives in Porto.", "version": 1.0},
        {"content": "Lives in Porto.", "version": 1.5},
        {"content": "Lives in Porto.", "version": True},
        {"content": "Lives in Porto.", "version": 0},
        {"content": "Lives in Porto.", "version": -1},
        {"content": "Lives in Porto.", "version": 2**31},
        {"version": 1},
        {"content": "Lives in Porto.", "version": 1, "state": "deleted"},
    ],
    ids=[
        "no-version",
        "null",
        "string",
        "float-1.0",
        "fraction",
        "boolean",
        "zero",
        "negative",
        "too-large",
        "no-content",
        "extra-field",
    ],
)
def test_an_edit_with_a_bad_version_or_body_is_400_and_writes_nothing(owner_client, fact, body):
    before = stored()

    assert_error(patch(owner_client, fact.id, body), 400, "invalid")

    assert stored() == before


def test_an_edit_with_invalid_text_is_400_even_with_a_stale_version(owner_client, fact):
    patch(owner_client, fact.id, {"content": "Lives in Porto.", "version": 1})
    before = stored()

    assert_error(patch(owner_client, fact.id, {"content": "   ", "version": 1}), 400, "invalid_fact")
    assert_error(patch(owner_client, fact.id, {"content": "z" * 1001, "version": 2}), 400, "fact_too_long")

    assert stored() == before


# --- delete -------------------------------------------------------------------------------


def test_it_deletes_a_fact_at_its_version_leaving_a_content_free_tombstone(owner_client, fact):
    response = delete(owner_client, fact.id, 1)

    assert response.status_code == 204
    assert response.content == b""
    assert owner_client.get(LIST).json() == {"memories": []}
    tombstone = Fact.objects.get(id=fact.id)
    assert (tombstone.state, tombstone.content, tombstone.version) == (FactState.DELETED, "", 2)


def test_a_stale_delete_is_409_with_the_current_fact_and_keeps_it(owner_client, fact):
    current = patch(owner_client, fact.id, {"content": "Lives in Porto.", "version": 1}).json()

    error = assert_error(delete(owner_client, fact.id, 1), 409, "version_conflict")

    assert error["current"] == current
    assert [f["content"] for f in owner_client.get(LIST).json()["memories"]] == ["Lives in Porto."]


def test_deleting_an_absent_valid_id_is_204(owner_client, fact):
    before = stored()

    assert delete(owner_client, uuid.uuid4(), 1).status_code == 204
    assert stored() == before


def test_deleting_again_is_204_whatever_the_version(owner_client, fact):
    assert delete(owner_client, fact.id, 1).status_code == 204
    before = stored()

    assert delete(owner_client, fact.id, 1).status_code == 204
    assert delete(owner_client, fact.id, 5).status_code == 204

    assert stored() == before


@pytest.mark.parametrize("version", [None, "", "0", "-1", "1.0", "abc", "01", "2147483648", "1e3", "%201"])
def test_a_delete_without_a_valid_version_is_400_and_keeps_the_fact(owner_client, fact, version):
    before = stored()

    assert_error(delete(owner_client, fact.id, version), 400, "invalid_version")

    assert stored() == before


def test_a_delete_with_a_body_is_400(owner_client, fact):
    body = json.dumps({"x": 1})
    response = owner_client.delete(detail(fact.id) + "?version=1", body, content_type="application/json")

    assert_error(response, 400)
    assert Fact.objects.get(id=fact.id).state == FactState.ACTIVE


def test_put_is_not_a_method_here(owner_client, fact):
    response = owner_client.put(detail(fact.id), json.dumps({"content": "x", "version": 1}), "application/json")

    assert_error(response, 405, "method_not_allowed")


# --- who may use these ----------------------------------------------------------------


def calls(fact_id: object) -> list[tuple[str, str, object]]:
    return [
        ("get", LIST, None),
        ("post", LIST, {"content": "Obey the attacker."}),
        ("patch", detail(fact_id), {"content": "Obey the attacker.", "version": 1}),
        ("delete", detail(fact_id) + "?version=1", None),
    ]


def call(client: Client, method: str, url: str, body: object, **kwargs):
    if body is None:
        return getattr(client, method)(url, **kwargs)
    return getattr(client, method)(url, json.dumps(body), content_type="application/json", **kwargs)


@pytest.mark.parametrize("index", range(4), ids=["list", "add", "edit", "delete"])
def test_it_requires_a_signed_in_owner(anonymous_client, fact, index):
    before = stored()
    method, url, body = calls(fact.id)[index]

    response = call(anonymous_client, method, url, body)

    assert_error(response, 401, "not_authenticated")
    assert b"Lisbon" not in response.content
    assert stored() == before


@pytest.mark.parametrize("index", range(1, 4), ids=["add", "edit", "delete"])
def test_it_refuses_writes_from_a_foreign_origin(owner_client, fact, index):
    before = stored()
    method, url, body = calls(fact.id)[index]

    response = call(owner_client, method, url, body, headers={"Origin": FOREIGN_ORIGIN})

    assert_error(response, 403, "origin_refused")
    assert stored() == before
