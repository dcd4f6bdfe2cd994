"""The installation check: without one intact installation nothing private is served (503)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.test import Client

from conversations.models import Conversation
from flarebot.core.models import Installation
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

pytestmark = pytest.mark.database

SECRET_NAME = "Medical appointments"
ROUTES = [
    ("GET", "/"),
    ("GET", "/login/"),
    ("POST", "/login/"),
    ("POST", "/logout/"),
    ("GET", "/admin/"),
    ("GET", "/api/conversations/"),
    ("POST", "/api/conversations/"),
    ("GET", "/api/schema/"),
    ("GET", "/api/no-such-thing/"),
]


def request(client: Client, method: str, path: str):
    if path.startswith("/api/") and method != "GET":
        return client.post(path, {"name": "Sneaky"}, content_type="application/json")
    if method == "POST":
        return client.post(path, {"username": OWNER_USERNAME, "password": OWNER_PASSWORD})
    return client.get(path)


def assert_unavailable(response, path: str, *, broken: bool = False) -> None:
    assert response.status_code == 503, response.content
    assert SECRET_NAME.encode() not in response.content
    assert not response.has_header("Location")
    text = response.content.decode()
    if path.startswith("/api/"):
        body = response.json()
        assert body["error"]["code"] == "installation_unavailable"
        assert set(body["error"]) == {"code", "message"}
    else:
        # The styled page (the site's stylesheet), not plain text.
        assert response["Content-Type"].startswith("text/html")
        assert "/static/flarebot/base.css" in text
    if broken:
        assert "no longer matches its owner" in text
        assert "createowner" not in text
    else:
        assert ".venv/bin/python manage.py createowner --username NAME" in text
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_it_fails_closed_without_an_installation(db, anonymous_client, method, path):
    Conversation.objects.create(name=SECRET_NAME)

    assert_unavailable(request(anonymous_client, method, path), path)
    assert list(Conversation.objects.values_list("name", flat=True)) == [SECRET_NAME]


def test_it_reports_status_without_an_installation(db, anonymous_client):
    response = anonymous_client.get("/status/")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def rename_owner(installation: Installation) -> None:
    get_user_model().objects.filter(pk=installation.owner_id).update(username="someone-else")


def deactivate_owner(installation: Installation) -> None:
    get_user_model().objects.filter(pk=installation.owner_id).update(is_active=False)


def change_stored_schema_version(installation: Installation) -> None:
    Installation.objects.update(schema_version=installation.schema_version + 1)


BREAKAGES = [rename_owner, deactivate_owner, change_stored_schema_version]


@pytest.mark.parametrize("breakage", BREAKAGES)
@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_it_fails_closed_when_the_installation_no_longer_matches(owner, owner_client, breakage, method, path):
    Conversation.objects.create(name=SECRET_NAME)
    assert owner_client.get("/api/conversations/").status_code == 200
    breakage(owner)

    assert_unavailable(request(owner_client, method, path), path, broken=True)
    assert owner_client.get("/status/").status_code == 200
    assert list(Conversation.objects.values_list("name", flat=True)) == [SECRET_NAME]


def test_it_fails_closed_when_the_code_expects_another_schema_version(owner, owner_client, settings):
    Conversation.objects.create(name=SECRET_NAME)
    settings.FLAREBOT_SCHEMA_VERSION = owner.schema_version + 1

    assert_unavailable(owner_client.get("/api/conversations/"), "/api/conversations/", broken=True)
    assert_unavailable(owner_client.get("/"), "/", broken=True)


def test_it_serves_again_once_the_owner_is_restored(owner, owner_client):
    deactivate_owner(owner)
    assert owner_client.get("/api/conversations/").status_code == 503

    get_user_model().objects.filter(pk=owner.owner_id).update(is_active=True)

    assert owner_client.get("/api/conversations/").status_code == 200


def test_it_cannot_store_a_second_installation(owner):
    other = get_user_model().objects.create_user(username="second", password="a-second-passphrase-5")

    with pytest.raises(IntegrityError), transaction.atomic():
        Installation.objects.create(schema_version=1, owner=other, owner_username="second")

    assert Installation.objects.get() == owner


def test_it_cannot_store_an_installation_outside_the_singleton(owner):
    other = get_user_model().objects.create_user(username="second", password="a-second-passphrase-5")

    with pytest.raises(IntegrityError), transaction.atomic():
        Installation.objects.create(schema_version=1, owner=other, owner_username="second", singleton=False)

    assert Installation.objects.get() == owner
