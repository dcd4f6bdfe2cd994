"""The notifications JSON API as PROTOCOL.md "Notifications" describes it; bad input changes nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from notifications import services
from notifications.models import Destination, NotificationSettings
from tests.notifications.conftest import DESTINATIONS, SECRET, SETTINGS, json_url, send

pytestmark = pytest.mark.django_db

LOOPBACK = f"json://127.0.0.1:9/hook/{SECRET}"


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Cache-Control"] == "no-store"
    error = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"]
    return error


def stored() -> list[tuple]:
    return list(Destination.objects.order_by("id").values_list("id", "label", "masked"))


def test_it_adds_a_destination_and_shows_it_only_masked(owner_client):
    response = send(owner_client, "post", DESTINATIONS, {"url": LOOPBACK, "label": "Phone"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {"id", "label", "url", "created_at"}
    assert (body["label"], body["url"]) == ("Phone", "json://••••••")
    listed = owner_client.get(DESTINATIONS).json()
    assert listed["destinations"] == [body]
    assert listed["limits"] == {"max_destinations": 10, "label_max": 60, "url_max": 1000}
    assert SECRET not in response.content.decode() + owner_client.get(DESTINATIONS).content.decode()


def test_the_url_is_sealed_at_rest(owner_client):
    send(owner_client, "post", DESTINATIONS, {"url": LOOPBACK, "label": "Phone"})

    row = Destination.objects.get()
    assert SECRET.encode() not in bytes(row.sealed)
    assert SECRET not in row.masked + row.label


def test_it_refuses_a_url_apprise_cannot_read_and_changes_nothing(owner_client):
    for url in ("https://example.com/hook", "nosuchservice://host/x", "json://"):
        error = assert_error(send(owner_client, "post", DESTINATIONS, {"url": url, "label": "X"}), 400, "invalid_url")
        assert "Apprise cannot read this URL" in error["message"]
    assert stored() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"url": LOOPBACK, "label": ""}, "label"),
        ({"url": LOOPBACK, "label": "   "}, "label"),
        ({"url": LOOPBACK, "label": "a\u202eb"}, "label"),
        ({"url": LOOPBACK, "label": 7}, "label"),
        ({"url": "json://127.0.0.1:9/a b", "label": "X"}, "url"),
    ],
)
def test_it_refuses_a_bad_label_or_url(owner_client, body, field):
    error = assert_error(send(owner_client, "post", DESTINATIONS, body), 400, "invalid_destination")
    assert set(error["fields"]) == {field}
    assert stored() == []


def test_it_refuses_a_body_of_the_wrong_shape(owner_client):
    for body in ({"url": None, "label": "X"}, {"url": LOOPBACK}, {"url": LOOPBACK, "label": "X", "extra": 1}, []):
        assert_error(send(owner_client, "post", DESTINATIONS, body), 400, "invalid")
    assert stored() == []


def test_the_label_and_url_limits_hold_at_their_edges(owner_client):
    url = LOOPBACK + "/" + "x" * (services.URL_MAX - len(LOOPBACK) - 1)
    assert len(url) == services.URL_MAX
    ok = send(owner_client, "post", DESTINATIONS, {"url": url, "label": "L" * services.LABEL_MAX})
    assert ok.status_code == 201, ok.content

    long_label = send(owner_client, "post", DESTINATIONS, {"url": LOOPBACK, "label": "L" * (services.LABEL_MAX + 1)})
    assert assert_error(long_label, 400, "invalid_destination")["fields"] == {
        "label": [f"The label must be 1-{services.LABEL_MAX} characters long."]
    }
    long_url = send(owner_client, "post", DESTINATIONS, {"url": url + "x", "label": "L"})
    assert set(assert_error(long_url, 400, "invalid_destination")["fields"]) == {"url"}
    assert len(stored()) == 1


def test_at_most_ten_destinations(owner_client):
    for n in range(services.MAX_DESTINATIONS):
        assert send(owner_client, "post", DESTINATIONS, {"url": LOOPBACK, "label": f"D{n}"}).status_code == 201
    before = stored()

    response = send(owner_client, "post", DESTINATIONS, {"url": LOOPBACK, "label": "One more"})

    assert_error(response, 429, "destinations_full")
    assert stored() == before


def test_it_deletes_a_destination(owner_client):
    created = send(owner_client, "post", DESTINATIONS, {"url": LOOPBACK, "label": "Phone"}).json()

    assert owner_client.delete(f"{DESTINATIONS}{created['id']}/").status_code == 204
    assert owner_client.delete(f"{DESTINATIONS}{created['id']}/").status_code == 204
    assert owner_client.get(DESTINATIONS).json()["destinations"] == []
    assert_error(owner_client.delete(f"{DESTINATIONS}NOT-AN-ID/"), 400, "invalid_id")


def test_the_test_button_reports_what_the_destination_did(owner_client, json_receiver):
    created = send(owner_client, "post", DESTINATIONS, {"url": json_url(json_receiver), "label": "Hook"}).json()
    path = f"{DESTINATIONS}{created['id']}/test/"

    assert owner_client.post(path, content_type="application/json").json() == {
        "ok": True,
        "message": "The destination accepted the test message.",
    }
    [payload] = json_receiver.payloads()
    assert payload["title"] == "Flarebot test"
    json_receiver.status = 500
    refused = owner_client.post(path, content_type="application/json").json()
    assert refused["ok"] is False
    assert refused["message"].startswith("The destination did not accept the message")
    assert SECRET not in refused["message"]
    assert_error(
        owner_client.post(f"{DESTINATIONS}{uuid.uuid4()}/test/", content_type="application/json"), 404, "not_found"
    )


def test_the_settings_have_their_defaults(owner_client):
    assert owner_client.get(SETTINGS).json() == {
        "kinds": {
            "needs_answer": True,
            "proposal": True,
            "run_failed": True,
            "browser_finished": True,
            "run_completed": False,
        },
        "quiet_hours": {"enabled": False, "start": None, "end": None, "time_zone": "UTC"},
        "failures": [],
    }


GOOD: dict[str, Any] = {
    "kinds": {
        "needs_answer": True,
        "proposal": False,
        "run_failed": True,
        "browser_finished": False,
        "run_completed": True,
    },
    "quiet_hours": {"enabled": True, "start": "22:30", "end": "07:00", "time_zone": "Europe/Berlin"},
}


def test_it_saves_the_kinds_and_quiet_hours(owner_client):
    response = send(owner_client, "put", SETTINGS, GOOD)

    assert response.status_code == 200, response.content
    assert response.json() == {**GOOD, "failures": []}
    assert owner_client.get(SETTINGS).json() == {**GOOD, "failures": []}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"kinds": {**GOOD["kinds"], "run_completed": "yes"}}, "kinds.run_completed"),
        ({"kinds": {"needs_answer": True}}, "kinds"),
        ({"quiet_hours": {**GOOD["quiet_hours"], "start": "24:00"}}, "quiet_hours.start"),
        ({"quiet_hours": {**GOOD["quiet_hours"], "end": "22:30"}}, "quiet_hours.end"),
        ({"quiet_hours": {**GOOD["quiet_hours"], "time_zone": "Mars/Olympus"}}, "quiet_hours.time_zone"),
        ({"quiet_hours": {**GOOD["quiet_hours"], "enabled": 1}}, "quiet_hours.enabled"),
    ],
)
def test_it_refuses_bad_settings_and_changes_nothing(owner_client, change, field):
    error = assert_error(send(owner_client, "put", SETTINGS, {**GOOD, **change}), 400, "invalid_settings")
    assert set(error["fields"]) == {field}
    assert not NotificationSettings.objects.exists()


def test_only_the_owner_reaches_it(anonymous_client, owner):
    assert anonymous_client.get(DESTINATIONS).status_code in (401, 403)
    response = send(anonymous_client, "post", DESTINATIONS, {"url": LOOPBACK, "label": "X"})
    assert response.status_code in (401, 403)
    assert stored() == []
