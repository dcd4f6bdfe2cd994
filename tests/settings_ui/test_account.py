"""Changing the owner's password from Settings: the current one is checked like a sign-in."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from tests.conftest import signed_in_client
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

pytestmark = pytest.mark.django_db

URL = "/api/account/password/"
NEW = "a-brand-new-owner-passphrase-77"


def change(client: Client, current: str, new: str):
    return client.post(URL, {"current_password": current, "new_password": new}, content_type="application/json")


def test_it_changes_the_password_keeps_this_session_and_ends_the_others(owner):
    this, other = signed_in_client(owner), signed_in_client(owner)

    response = change(this, OWNER_PASSWORD, NEW)

    assert response.status_code == 204
    assert get_user_model().objects.get(username=OWNER_USERNAME).check_password(NEW)
    assert this.get("/api/conversations/").status_code == 200
    assert other.get("/api/conversations/").status_code == 401
    fresh = Client(headers={"Origin": settings.FLAREBOT_ORIGIN})
    assert fresh.post("/login/", {"username": OWNER_USERNAME, "password": OWNER_PASSWORD}).status_code == 400
    assert fresh.post("/login/", {"username": OWNER_USERNAME, "password": NEW}).status_code == 302


def test_a_wrong_current_password_changes_nothing_and_counts_as_a_failed_sign_in(owner):
    client = signed_in_client(owner)

    for _ in range(settings.FLAREBOT_SIGNIN_FAILURES_PER_ACCOUNT):
        wrong = change(client, "not-the-password-at-all", NEW)
        assert (wrong.status_code, wrong.json()["error"]["code"]) == (400, "wrong_password")
    throttled = change(client, OWNER_PASSWORD, NEW)

    assert (throttled.status_code, throttled.json()["error"]["code"]) == (429, "signin_throttled")
    assert get_user_model().objects.get(username=OWNER_USERNAME).check_password(OWNER_PASSWORD)


@pytest.mark.parametrize(
    ("new", "said"),
    [
        ("short-1", "at least 12 characters"),
        ("123456789012345", "entirely numeric"),
        (OWNER_PASSWORD, "the current one"),
    ],
)
def test_a_weak_or_unchanged_new_password_is_refused(owner, new, said):
    client = signed_in_client(owner)

    response = change(client, OWNER_PASSWORD, new)

    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_password")
    assert said in response.json()["error"]["message"]
    assert get_user_model().objects.get(username=OWNER_USERNAME).check_password(OWNER_PASSWORD)


def test_it_needs_the_session_and_the_origin(owner, anonymous_client):
    assert change(anonymous_client, OWNER_PASSWORD, NEW).status_code == 401
    client = signed_in_client(owner)
    foreign = client.post(
        URL,
        {"current_password": OWNER_PASSWORD, "new_password": NEW},
        content_type="application/json",
        headers={"Origin": "http://evil.example"},
    )
    assert foreign.status_code == 403
    assert "current_password" not in foreign.content.decode()
