"""The Account section of /settings/: the owner changes the password in Chromium."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import screenshot, sign_in
from tests.e2e.settings_support import dialogs, settings_page
from tests.support.live import LiveStack
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

__all__ = ["dialogs", "settings_page"]

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

NEW = "a-brand-new-owner-passphrase-77"


def fill(page: Page, current: str, new: str, again: str) -> None:
    page.locator("#password-current").fill(current)
    page.locator("#password-new").fill(new)
    page.locator("#password-again").fill(again)
    page.get_by_role("button", name="Change password").click()


@pytest.mark.parametrize("width", [1280, 375])
def test_the_owner_changes_the_password_and_other_browsers_are_signed_out(
    settings_page: Page,
    browser: Browser,
    live_stack: LiveStack,
    width: int,
) -> None:
    page = settings_page
    page.set_viewport_size({"width": width, "height": 900})
    elsewhere = browser.new_context(base_url=live_stack.base_url).new_page()
    sign_in(elsewhere)
    message = page.locator("#password-message")
    # The stored hash, compared as it is (check_password here could re-hash it with this
    # process's hasher and so end the sessions itself).
    stored = get_user_model().objects.get(username=OWNER_USERNAME).password

    fill(page, OWNER_PASSWORD, NEW, NEW + "x")
    expect(message).to_have_text("The two new passwords differ.")
    fill(page, "not the password", NEW, NEW)
    expect(message).to_have_text("The current password is not right.")
    fill(page, OWNER_PASSWORD, "short-1", "short-1")
    expect(message).to_contain_text("at least 12 characters")
    assert get_user_model().objects.get(username=OWNER_USERNAME).password == stored

    fill(page, OWNER_PASSWORD, NEW, NEW)

    expect(message).to_have_text("Password changed. Every other browser and device is signed out.")
    expect(page.locator("#password-current")).to_have_value("")
    screenshot(page, f"settings-account-{width}")
    assert get_user_model().objects.get(username=OWNER_USERNAME).password != stored
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")  # this browser stays signed in
    elsewhere.goto("/")
    expect(elsewhere.locator("input[name=password]")).to_be_visible()  # the other one is signed out
    elsewhere.context.close()
