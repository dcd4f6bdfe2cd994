"""Signing in and out in the browser."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from playwright.sync_api import Page, expect

from flarebot.core.models import Installation
from tests.e2e.conftest import sign_in
from tests.support.owner import OWNER_USERNAME

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_signed_out_visitor_is_sent_to_sign_in(page: Page, owner: Installation) -> None:
    page.goto("/")
    assert urlparse(page.url).path == "/login/"
    expect(page.locator("input[name=username]")).to_be_visible()


def test_owner_signs_in_and_reaches_chat(page: Page, owner: Installation) -> None:
    sign_in(page)
    assert urlparse(page.url).path == "/"
    expect(page.locator("input[name=password]")).to_have_count(0)


def test_wrong_password_stays_on_sign_in_with_the_cursor_in_the_password(page: Page, owner: Installation) -> None:
    page.goto("/login/")
    page.fill("input[name=username]", OWNER_USERNAME)
    page.fill("input[name=password]", "not the password")
    page.click("button[type=submit]")
    expect(page.locator("body")).to_contain_text("do not match")
    assert urlparse(page.url).path == "/login/"
    # The username stays; the cursor is in the password field, to type it again.
    expect(page.locator("input[name=username]")).to_have_value(OWNER_USERNAME)
    expect(page.locator("input[name=password]")).to_be_focused()
