"""/setup/: the first owner is created in the browser from the one-time link `make run` printed."""

from __future__ import annotations

import stat
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from flarebot.core.models import Installation
from flarebot.core.setup_link import setup_token_issue, setup_token_path

PASSWORD = "a-long-first-owner-passphrase-7"


@pytest.fixture
def token(db) -> Iterator[str]:
    issued = setup_token_issue(data_dir=settings.FLAREBOT_DATA_DIR)
    yield issued
    setup_token_path(settings.FLAREBOT_DATA_DIR).unlink(missing_ok=True)


def create(client: Client, token: str, **fields: str):
    form = {"token": token, "username": "alice", "password": PASSWORD, "password_again": PASSWORD, **fields}
    return client.post("/setup/", form)


def test_it_issues_128_random_bits_in_an_owner_only_file(token):
    path = setup_token_path(settings.FLAREBOT_DATA_DIR)

    assert path.read_text() == token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(token) == 22  # 16 bytes, URL-safe base64
    assert setup_token_issue(data_dir=settings.FLAREBOT_DATA_DIR) != token


def test_it_shows_the_form_for_the_exact_token(anonymous_client, token):
    response = anonymous_client.get(f"/setup/?token={token}")

    assert response.status_code == 200
    text = response.content.decode()
    assert 'name="username"' in text
    assert 'name="password_again"' in text
    assert response["Referrer-Policy"] == "strict-origin"
    assert response["Cache-Control"] == "no-store"


def test_it_creates_the_owner_signs_in_and_the_token_dies(anonymous_client, token):
    response = create(anonymous_client, token)

    assert response.status_code == 302
    assert response["Location"] == "/"
    installation = Installation.objects.get()
    assert installation.owner_username == "alice"
    assert installation.owner.check_password(PASSWORD)
    assert anonymous_client.get("/api/conversations/").status_code == 200  # signed in
    assert not setup_token_path(settings.FLAREBOT_DATA_DIR).exists()
    assert anonymous_client.get(f"/setup/?token={token}").status_code == 404
    assert create(Client(headers={"Origin": settings.FLAREBOT_ORIGIN}), token, username="mallory").status_code == 404
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["alice"]


@pytest.mark.parametrize(
    "wrong",
    ["", "x", "TOKEN-UPPER", "TOKEN-PREFIX", "TOKEN-SUFFIX", "TOKEN-SPACE"],
)
def test_it_answers_404_without_the_exact_token(anonymous_client, token, wrong):
    variants = {
        "TOKEN-UPPER": token.upper(),
        "TOKEN-PREFIX": token[:-1],
        "TOKEN-SUFFIX": token + "A",
        "TOKEN-SPACE": f" {token}",
    }
    wrong = variants.get(wrong, wrong)

    assert anonymous_client.get("/setup/", {"token": wrong}).status_code == 404
    assert create(anonymous_client, wrong).status_code == 404
    assert not Installation.objects.exists()


def test_it_answers_404_when_no_run_issued_a_token(anonymous_client, db):
    assert anonymous_client.get("/setup/?token=AAAAAAAAAAAAAAAAAAAAAA").status_code == 404


def test_wrong_tokens_count_against_the_sign_in_throttle(anonymous_client, token):
    for _ in range(settings.FLAREBOT_SIGNIN_FAILURES_PER_ACCOUNT):
        assert anonymous_client.get("/setup/?token=wrong-guess").status_code == 404

    refused = anonymous_client.get(f"/setup/?token={token}")
    assert refused.status_code == 429
    assert "Too many failed attempts" in refused.content.decode()
    assert token not in refused.content.decode()
    assert create(anonymous_client, token).status_code == 429
    assert not Installation.objects.exists()


def test_the_right_token_does_not_count_as_a_failure(anonymous_client, token):
    for _ in range(settings.FLAREBOT_SIGNIN_FAILURES_PER_ACCOUNT + 2):
        assert anonymous_client.get(f"/setup/?token={token}").status_code == 200


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"password": "short", "password_again": "short"}, "too short"),
        ({"password": "123456789012345", "password_again": "123456789012345"}, "entirely numeric"),
        ({"password_again": PASSWORD + "x"}, "The two passwords differ"),
        ({"username": "  "}, "Enter a username"),
    ],
)
def test_it_refuses_a_weak_or_mistyped_password_and_creates_nothing(anonymous_client, token, fields, said):
    response = create(anonymous_client, token, **fields)

    assert response.status_code == 400
    assert said in response.content.decode()
    assert not Installation.objects.exists()
    assert not get_user_model().objects.exists()
    assert setup_token_path(settings.FLAREBOT_DATA_DIR).exists()  # the link still works
    assert create(anonymous_client, token).status_code == 302


def test_createowner_kills_the_token_too(anonymous_client, token, monkeypatch):
    monkeypatch.setenv("FLAREBOT_OWNER_PASSWORD", PASSWORD)
    call_command("createowner", username="alice")

    assert not setup_token_path(settings.FLAREBOT_DATA_DIR).exists()
    assert anonymous_client.get(f"/setup/?token={token}").status_code == 404


def test_it_needs_the_exact_origin_to_create(db, token):
    foreign = Client(headers={"Origin": "http://evil.example"})

    assert create(foreign, token).status_code == 403
    assert not Installation.objects.exists()


def test_pages_explain_the_setup_link_and_the_command_until_an_owner_exists(anonymous_client, db):
    response = anonymous_client.get("/")

    assert response.status_code == 503
    text = response.content.decode()
    assert "/setup/?token=" in text
    assert "setup_token" in text
    assert ".venv/bin/python manage.py createowner --username NAME" in text
