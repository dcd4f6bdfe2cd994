"""The first owner, created in the browser from the one-time setup link."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from flarebot.core.models import Installation
from flarebot.core.setup_link import setup_token_issue, setup_token_path
from tests.e2e.conftest import screenshot

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-long-first-owner-passphrase-7"


@pytest.fixture
def setup_token() -> Iterator[str]:
    yield setup_token_issue(data_dir=settings.FLAREBOT_DATA_DIR)
    setup_token_path(settings.FLAREBOT_DATA_DIR).unlink(missing_ok=True)


@pytest.mark.parametrize("width", [1280, 375])
def test_a_newcomer_opens_the_link_creates_the_owner_and_lands_in_chat(page: Page, setup_token: str, width: int):
    page.set_viewport_size({"width": width, "height": 800})
    page.goto("/")
    expect(page.locator("h1")).to_have_text("Flarebot has no owner yet")
    expect(page.locator("body")).to_contain_text(".venv/bin/python manage.py createowner --username NAME")
    screenshot(page, f"setup-no-owner-{width}")

    page.goto(f"/setup/?token={setup_token}")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "short")
    page.fill("input[name=password_again]", "short")
    page.click("button[type=submit]")
    expect(page.get_by_role("alert")).to_contain_text("too short")
    expect(page.locator("input[name=username]")).to_have_value("alice")
    screenshot(page, f"setup-refused-{width}")

    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=password_again]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: urlparse(url).path == "/")
    expect(page.locator("#composer textarea, textarea").first).to_be_visible()
    assert Installation.objects.get().owner_username == "alice"

    response = page.goto(f"/setup/?token={setup_token}")
    assert response is not None
    assert response.status == 404
