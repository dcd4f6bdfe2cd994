"""Bad input over HTTP, as a security probe sends it: a 400 in the contract's shape, nothing changed.

Each case here once reached a server error: a lone surrogate (no UTF-8 holds one), a body
nested deeper than the JSON parser's recursion, digits that `str.isdigit` takes and
`int` refuses, a cursor whose date overflows in UTC. The socket's cases are in
tests/conversations/test_consumers.py (INVALID_FRAMES and the `last_sequence` tests).
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from django.apps import apps
from django.test import Client

from conversations.models import Conversation

LONE_SURROGATES = ["\ud800", "\udfff", "a\ud83dz", "\ude00\ud83d", "name \udbff"]

DEEP = 100_000


def row_counts() -> dict[str, int]:
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert 0 < len(body["error"]["message"]) <= 500


@pytest.fixture
def conversation(owner) -> Conversation:
    return Conversation.objects.create(name="Reading list")


def json_bodies(conversation_id: uuid.UUID) -> list[tuple[str, str, dict[str, str]]]:
    """Every JSON endpoint that takes text, with a body whose one text field is the placeholder."""
    return [
        ("POST", "/api/conversations/", {"name": "?"}),
        ("PATCH", f"/api/conversations/{conversation_id}/", {"name": "?"}),
        ("POST", f"/api/conversations/{conversation_id}/messages/", {"request_id": str(uuid.uuid4()), "text": "?"}),
        ("PUT", "/api/settings/instructions/", {"text": "?"}),
        ("PUT", "/api/settings/provider-keys/anthropic/", {"key": "?"}),
        ("PUT", "/api/settings/model/", {"provider": "anthropic", "model": "?"}),
    ]


def send_raw(client: Client, method: str, path: str, raw: str):
    return client.generic(method, path, raw.encode(), content_type="application/json")


@pytest.mark.parametrize("text", LONE_SURROGATES, ids=["high", "low", "high-inside", "reversed-pair", "max-high"])
def test_it_refuses_a_lone_surrogate_in_any_text_with_400(owner_client, conversation, text):
    before = row_counts()

    for method, path, body in json_bodies(conversation.id):
        filled = {name: (text if value == "?" else value) for name, value in body.items()}
        response = send_raw(owner_client, method, path, json.dumps(filled))

        assert_error(response, 400, "invalid_json")
    assert row_counts() == before
    assert Conversation.objects.get().name == "Reading list"


def test_it_refuses_a_lone_surrogate_in_a_field_name_or_a_nested_string(owner_client, conversation):
    before = row_counts()

    for raw in ('{"\\ud800": "x"}', '{"name": "ok", "x": [{"y": ["\\udc00"]}]}'):
        assert_error(send_raw(owner_client, "POST", "/api/conversations/", raw), 400, "invalid_json")
    assert row_counts() == before


def test_it_still_takes_surrogate_pairs_written_as_escapes(owner_client):
    response = send_raw(owner_client, "POST", "/api/conversations/", '{"name": "Ideas \\ud83d\\ude00"}')

    assert response.status_code == 201, response.content
    assert Conversation.objects.get().name == "Ideas 😀"


@pytest.mark.parametrize(
    "raw",
    ["[" * DEEP, '{"name": ' + "[" * DEEP, '{"a": ' * DEEP, "[" * DEEP + "]" * DEEP],
    ids=["open-arrays", "arrays-in-a-field", "open-objects", "closed-arrays"],
)
def test_it_refuses_a_body_nested_too_deeply_with_400(owner_client, conversation, raw):
    before = row_counts()

    for method, path, _ in json_bodies(conversation.id):
        assert_error(send_raw(owner_client, method, path, raw), 400, "invalid_json")
    assert_error(
        send_raw(owner_client, "POST", f"/api/conversations/{conversation.id}/cancel/", raw), 400, "invalid_json"
    )
    assert row_counts() == before


@pytest.mark.parametrize("raw", ['{"name": NaN}', '{"name": Infinity}', '{"name": -Infinity}'])
def test_it_refuses_constants_that_are_not_json(owner_client, raw):
    assert_error(send_raw(owner_client, "POST", "/api/conversations/", raw), 400, "invalid_json")
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("after", ["²", "³", "\u0663", "\uff11", "\u07c1", "+3", " 3", "3 ", "0x1", "1_000"])
def test_it_refuses_an_after_that_is_not_ascii_digits(owner_client, conversation, after):
    response = owner_client.get(f"/api/conversations/{conversation.id}/events/", {"after": after})

    assert_error(response, 400, "invalid_after")


def cursor(created: str, row_id: uuid.UUID | None = None) -> str:
    raw = f"{created}|{row_id or uuid.uuid4()}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "created",
    [
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:59:59.999999+01:00",
        "9999-12-31T23:00:00-23:59",
    ],
)
def test_it_refuses_an_activities_cursor_whose_date_leaves_the_calendar_in_utc(owner_client, conversation, created):
    response = owner_client.get(f"/api/conversations/{conversation.id}/activities/", {"before": cursor(created)})

    assert_error(response, 400, "invalid_cursor")


@pytest.mark.parametrize("created", ["0001-01-01T01:00:00+01:00", "9999-12-31T22:59:59-01:00"])
def test_it_pages_from_a_cursor_at_the_calendars_edges(owner_client, conversation, created):
    response = owner_client.get(f"/api/conversations/{conversation.id}/activities/", {"before": cursor(created)})

    assert response.status_code == 200, response.content
    assert response.json() == {"activities": [], "next_cursor": None}


def test_it_answers_a_sign_in_with_encoded_surrogates_as_a_mismatch(owner, anonymous_client):
    # %ED%A0%80 is U+D800 in (invalid) UTF-8: the form decodes it to replacement characters.
    response = anonymous_client.post(
        "/login/", "username=%ED%A0%80&password=%ED%A0%80", content_type="application/x-www-form-urlencoded"
    )

    assert response.status_code == 400
    assert b"do not match" in response.content
