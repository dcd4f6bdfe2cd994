"""The conversations JSON API, exactly as PROTOCOL.md describes it."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from conversations.models import Conversation

LIST = "/api/conversations/"
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
UUID_LOWER = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def detail(conversation_id: object) -> str:
    return f"{LIST}{conversation_id}/"


def parse_iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def assert_error(response, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert {"code", "message"} <= set(body["error"])
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code


def create(client, body: object):
    return client.post(LIST, json.dumps(body), content_type="application/json")


def rename(client, conversation_id: object, body: object):
    return client.patch(detail(conversation_id), json.dumps(body), content_type="application/json")


def snapshot() -> list[tuple]:
    return list(Conversation.objects.order_by("id").values_list("id", "name", "state", "updated_at"))


@pytest.fixture
def conversation(owner) -> Conversation:
    return Conversation.objects.create(name="Reading list")


def test_it_creates_a_conversation_with_the_default_name(owner_client):
    response = create(owner_client, {})

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "name", "created_at", "updated_at", "unread"}
    assert body["unread"] == 0
    assert body["name"] == "New conversation"
    assert UUID_LOWER.match(body["id"])
    assert ISO_Z.match(body["created_at"])
    assert ISO_Z.match(body["updated_at"])
    stored = Conversation.objects.get()
    assert str(stored.id) == body["id"]
    assert stored.name == "New conversation"
    assert abs(parse_iso(body["created_at"]) - stored.created_at) < timedelta(milliseconds=1)
    assert abs(parse_iso(body["created_at"]) - timezone.now()) < timedelta(minutes=1)


def test_it_creates_a_conversation_with_the_given_name(owner_client):
    response = create(owner_client, {"name": "Trip to Lisbon"})

    assert response.status_code == 201
    assert response.json()["name"] == "Trip to Lisbon"
    assert Conversation.objects.get().name == "Trip to Lisbon"


@pytest.mark.parametrize(
    "name",
    ["x" * 120, "é" * 120, "😀" * 60, "😀" * 59 + "ab", " " * 119 + "x", "a"],
    ids=["120-ascii", "120-bmp", "60-emoji", "59-emoji-2-ascii", "119-spaces-1-char", "1-char"],
)
def test_it_accepts_a_name_of_1_to_120_utf16_units(owner_client, name):
    response = create(owner_client, {"name": name})

    assert response.status_code == 201, response.content
    assert response.json()["name"] == name.strip()
    assert Conversation.objects.get().name == name.strip()


@pytest.mark.parametrize(
    "name",
    [
        "x" * 121,
        "😀" * 61,
        "😀" * 60 + "a",
        " " * 120 + "x",
        "",
        " ",
        "   \u3000  ",
        "bad\x00name",
        "bell\x07",
        "\x1b[31mred",
        "delete\x7f",
        "next\u0085line",
        "tab\there",
        "line\nbreak",
    ],
    ids=[
        "121-ascii",
        "61-emoji",
        "60-emoji-1-ascii",
        "121-before-trimming",
        "empty",
        "space",
        "whitespace-only",
        "nul",
        "bel",
        "esc",
        "del",
        "nel",
        "tab",
        "newline",
    ],
)
def test_it_refuses_a_name_outside_the_contract(owner_client, name):
    response = create(owner_client, {"name": name})

    assert_error(response, 400)
    assert not Conversation.objects.exists()


DISGUISED_NAMES = {
    "right-to-left-override": "invoice\u202efdp.exe",
    "left-to-right-override": "\u202dplans",
    "embedding": "\u202aplans\u202c",
    "right-to-left-embedding": "\u202bplans",
    "isolate": "\u2066plans\u2069",
    "first-strong-isolate": "\u2068plans",
    "right-to-left-isolate": "\u2067plans",
    "right-to-left-mark": "plans\u200f",
    "left-to-right-mark": "\u200eplans",
    "arabic-letter-mark": "\u061cplans",
    "zero-width-space": "pl\u200bans",
    "zero-width-non-joiner": "pl\u200cans",
    "zero-width-joiner-between-letters": "pl\u200dans",
    "zero-width-joiner-alone": "\u200d",
    "word-joiner": "plans\u2060",
    "byte-order-mark": "\ufeffplans",
    "invisible-times": "x\u2062y",
}


@pytest.mark.parametrize("name", DISGUISED_NAMES.values(), ids=DISGUISED_NAMES.keys())
def test_it_refuses_a_name_with_direction_controls_or_invisible_characters(owner_client, conversation, name):
    before = snapshot()

    created = create(owner_client, {"name": name})
    renamed = rename(owner_client, conversation.id, {"name": name})

    assert_error(created, 400, "invalid_name")
    assert_error(renamed, 400, "invalid_name")
    assert snapshot() == before


@pytest.mark.parametrize(
    "name",
    ["👩\u200d💻 Work", "🏳\ufe0f\u200d🌈 Pride", "👨🏽\u200d💻 Code", "שלום world", "مرحبا"],
    ids=["zwj-emoji", "zwj-after-presentation-selector", "zwj-after-skin-tone", "hebrew", "arabic"],
)
def test_it_accepts_emoji_sequences_and_right_to_left_scripts_in_a_name(owner_client, name):
    response = create(owner_client, {"name": name})

    assert response.status_code == 201, response.content
    assert Conversation.objects.get().name == name


def test_it_stores_the_name_trimmed(owner_client, conversation):
    created = create(owner_client, {"name": "  Garden ideas \u3000"})
    renamed = rename(owner_client, conversation.id, {"name": "\u2003Reading list 2  "})

    assert created.json()["name"] == "Garden ideas"
    assert renamed.json()["name"] == "Reading list 2"
    assert set(Conversation.objects.values_list("name", flat=True)) == {"Garden ideas", "Reading list 2"}


@pytest.mark.parametrize("name", [42, 4.2, None, True, ["a"], {"a": "b"}])
def test_it_refuses_a_name_that_is_not_a_string(owner_client, conversation, name):
    before = snapshot()

    assert_error(create(owner_client, {"name": name}), 400)
    assert_error(rename(owner_client, conversation.id, {"name": name}), 400)
    assert snapshot() == before


def test_it_refuses_extra_fields(owner_client, conversation):
    before = snapshot()

    created = create(owner_client, {"name": "Fine", "pinned": True})
    renamed = rename(owner_client, conversation.id, {"name": "Fine", "id": str(uuid.uuid4())})

    assert_error(created, 400)
    assert_error(renamed, 400)
    assert "pinned" in created.json()["error"]["message"]
    assert snapshot() == before


@pytest.mark.parametrize("body", [[], ["name"], "name", 7, None])
def test_it_refuses_a_body_that_is_not_an_object(owner_client, conversation, body):
    before = snapshot()

    assert_error(create(owner_client, body), 400)
    assert_error(rename(owner_client, conversation.id, body), 400)
    assert snapshot() == before


@pytest.mark.parametrize("raw", ['{"name": ', "{name: 'x'}", '{"name": "x"} trailing', b'{"name": "\xff"}'])
def test_it_refuses_invalid_json(owner_client, conversation, raw):
    before = snapshot()

    created = owner_client.post(LIST, raw, content_type="application/json")
    renamed = owner_client.patch(detail(conversation.id), raw, content_type="application/json")

    assert_error(created, 400, "invalid_json")
    assert_error(renamed, 400, "invalid_json")
    assert snapshot() == before


def test_it_refuses_a_body_over_one_mebibyte(owner_client, conversation):
    before = snapshot()
    padded = '{"name": "Huge"' + " " * (1024 * 1024) + "}"

    created = owner_client.post(LIST, padded, content_type="application/json")
    renamed = owner_client.patch(detail(conversation.id), padded, content_type="application/json")

    assert_error(created, 413, "too_large")
    assert_error(renamed, 413, "too_large")
    assert snapshot() == before


def test_it_accepts_a_body_just_under_one_mebibyte(owner_client):
    body = '{"name": "Roomy"' + " " * (1024 * 1024 - 20) + "}"

    assert owner_client.post(LIST, body, content_type="application/json").status_code == 201


def test_it_lists_nothing_at_first(owner_client):
    response = owner_client.get(LIST)

    assert response.status_code == 200
    assert response.json() == {"conversations": []}


def test_it_lists_newest_updated_first_then_by_id(owner_client):
    ids = [uuid.UUID(int=n) for n in (3, 1, 2, 4)]
    for n, conversation_id in enumerate(ids):
        Conversation.objects.create(id=conversation_id, name=f"Conversation {n}")
    base = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
    Conversation.objects.filter(id__in=ids[:3]).update(updated_at=base)
    Conversation.objects.filter(id=ids[3]).update(updated_at=base - timedelta(seconds=1))
    Conversation.objects.create(name="Being deleted", state="deleting")

    body = owner_client.get(LIST).json()

    assert [c["id"] for c in body["conversations"]] == [str(uuid.UUID(int=n)) for n in (1, 2, 3, 4)]
    assert body["conversations"][0] == {
        "id": str(ids[1]),
        "name": "Conversation 1",
        "created_at": body["conversations"][0]["created_at"],
        "updated_at": "2030-05-01T12:00:00.000Z",
        "unread": 0,
    }


def test_it_keeps_a_renamed_conversation_in_its_place_in_the_list(owner_client):
    older = Conversation.objects.create(name="Older")
    Conversation.objects.create(name="Newer")
    Conversation.objects.filter(id=older.id).update(updated_at=timezone.now() - timedelta(days=1))

    rename(owner_client, older.id, {"name": "Older, renamed"})

    assert [c["name"] for c in owner_client.get(LIST).json()["conversations"]] == ["Newer", "Older, renamed"]


def test_it_renames_a_conversation_and_leaves_updated_at_alone(owner_client, conversation):
    last_week = (timezone.now() - timedelta(days=7)).replace(microsecond=123000)
    Conversation.objects.filter(id=conversation.id).update(updated_at=last_week)

    response = rename(owner_client, conversation.id, {"name": "Books to read"})

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == str(conversation.id)
    assert body["name"] == "Books to read"
    assert parse_iso(body["updated_at"]) == last_week
    assert abs(parse_iso(body["created_at"]) - conversation.created_at) < timedelta(milliseconds=1)
    stored = Conversation.objects.get()
    assert stored.name == "Books to read"
    assert stored.updated_at == last_week


def test_it_renames_with_an_uppercase_id(owner_client, conversation):
    response = rename(owner_client, str(conversation.id).upper(), {"name": "Shouted"})

    assert response.status_code == 200
    assert response.json()["id"] == str(conversation.id)


def test_it_needs_a_name_to_rename(owner_client, conversation):
    assert_error(rename(owner_client, conversation.id, {}), 400)
    assert Conversation.objects.get().name == "Reading list"


def test_it_refuses_an_invalid_name_on_rename(owner_client, conversation):
    for name in ("x" * 121, "   ", "a\x1bb"):
        assert_error(rename(owner_client, conversation.id, {"name": name}), 400)
    assert Conversation.objects.get().name == "Reading list"


def test_it_answers_404_when_renaming_an_unknown_conversation(owner_client, conversation):
    response = rename(owner_client, uuid.uuid4(), {"name": "Ghost"})

    assert_error(response, 404)
    assert list(Conversation.objects.values_list("name", flat=True)) == ["Reading list"]


def test_it_answers_404_when_renaming_a_deleted_conversation(owner_client, conversation):
    assert owner_client.delete(detail(conversation.id)).status_code == 204

    response = rename(owner_client, conversation.id, {"name": "Back from the dead"})

    assert_error(response, 404)
    assert Conversation.objects.get().name == "Reading list"


@pytest.mark.parametrize(
    "bad_id",
    [
        "not-a-uuid",
        "1234",
        "0" * 32,
        "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
        "{00000000000000000000000000000001--}",
        "urn:00000000000000000000000000000001",
        "00000000000000000000000000000001----",
    ],
)
def test_it_refuses_a_malformed_id(owner_client, bad_id):
    target = Conversation.objects.create(id=uuid.UUID(int=1), name="Target")

    renamed = rename(owner_client, bad_id, {"name": "Renamed"})
    deleted = owner_client.delete(detail(bad_id))

    assert_error(renamed, 400, "invalid_id")
    assert_error(deleted, 400, "invalid_id")
    target.refresh_from_db()
    assert (target.name, target.state) == ("Target", "active")


def test_it_deletes_a_conversation_at_once(owner_client, conversation):
    kept = Conversation.objects.create(name="Kept")

    response = owner_client.delete(detail(conversation.id))

    assert response.status_code == 204
    assert response.content == b""
    assert [c["id"] for c in owner_client.get(LIST).json()["conversations"]] == [str(kept.id)]


def test_it_answers_204_when_deleting_an_absent_conversation(owner_client, conversation):
    response = owner_client.delete(detail(uuid.uuid4()))

    assert response.status_code == 204
    assert list(Conversation.objects.values_list("name", "state")) == [("Reading list", "active")]


def test_it_answers_204_to_a_repeated_delete(owner_client, conversation):
    first = owner_client.delete(detail(conversation.id))
    requested_at = Conversation.objects.get().deletion_requested_at

    second = owner_client.delete(detail(conversation.id))

    assert (first.status_code, second.status_code) == (204, 204)
    assert Conversation.objects.get().deletion_requested_at == requested_at
    assert owner_client.get(LIST).json() == {"conversations": []}
