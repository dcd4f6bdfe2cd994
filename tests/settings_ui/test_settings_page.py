"""The settings page: only the owner sees it; it carries no secret and no inline script."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model
from django.test import Client

from conversations import instructions, model_settings
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

KEY = "sk-ant-settings-page-" + "k" * 24


def test_it_sends_a_signed_out_visitor_to_sign_in_and_back(owner, anonymous_client):
    response = anonymous_client.get("/settings/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/settings/"


def test_it_brings_the_owner_back_to_settings_after_sign_in(owner, anonymous_client):
    response = anonymous_client.post(
        "/login/", {"username": OWNER_USERNAME, "password": OWNER_PASSWORD, "next": "/settings/"}
    )

    assert response.status_code == 302
    assert response["Location"] == "/settings/"
    assert anonymous_client.get("/settings/").status_code == 200


def test_it_sends_another_signed_in_user_to_sign_in(owner, origin):
    get_user_model().objects.create_user(username="guest", password="a-guest-passphrase-77")
    client = Client(headers={"Origin": origin})
    assert client.login(username="guest", password="a-guest-passphrase-77")

    response = client.get("/settings/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/settings/"


def test_it_shows_the_settings_page_to_the_owner(owner_client):
    response = owner_client.get("/settings/")

    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    content = response.content.decode()
    for section in ("model", "instructions", "memory", "tasks"):
        assert f'id="{section}"' in content
    assert 'action="/logout/"' in content
    assert 'href="/"' in content
    # The token the page's scripts send with changes (static/flarebot/api.js reads it).
    assert re.search(r'name="csrfmiddlewaretoken" value="[A-Za-z0-9]{32,}"', content)
    assert 'id="key-anthropic"' in content
    assert 'id="key-openai"' in content
    assert "/static/flarebot/settings.js" in content
    assert "/static/flarebot/settings.css" in content


def test_it_keeps_secrets_and_inline_code_out_of_the_page(owner_client):
    model_settings.provider_key_set(provider="anthropic", key=KEY)
    instructions.instructions_set(text="Private instructions that only the API returns.")

    content = owner_client.get("/settings/").content.decode()

    assert KEY not in content
    assert "Private instructions" not in content
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", content) is None  # no inline script
    assert " style=" not in content
    assert re.search(r"\son[a-z]+=", content) is None  # no inline handlers


def test_it_refuses_to_post_to_the_settings_page(owner_client):
    assert owner_client.post("/settings/").status_code == 405
