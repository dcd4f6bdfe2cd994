"""Settings -> Notifications in Chromium, against a loopback JSON webhook, at 1280 and 375 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ARTIFACTS, screenshot
from tests.e2e.settings_support import Dialogs, api_get, dialogs, patient_expect, settings_page
from tests.support.notify_receivers import http_receiver

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

__all__ = ["dialogs", "patient_expect", "settings_page"]  # fixtures this module uses

SECRET = "e2e-s3cret-t0ken"


@pytest.mark.parametrize("width", [1280, 375])
def test_owner_adds_tests_tunes_and_deletes_a_destination(settings_page: Page, dialogs: Dialogs, width: int) -> None:
    page = settings_page
    page.set_viewport_size({"width": width, "height": 900})
    section = page.locator("#notifications")
    with http_receiver() as receiver:
        url = f"json://127.0.0.1:{receiver.port}/hook/{SECRET}"
        section.get_by_label("Apprise URL").fill("https://not-an-apprise-url.example/")
        section.get_by_label("Label").fill("Webhook")
        section.get_by_role("button", name="Add destination").click()
        expect(section.locator("#notify-add-message")).to_contain_text("Apprise cannot read this URL")

        section.get_by_label("Apprise URL").fill(url)
        section.get_by_role("button", name="Add destination").click()
        item = section.locator(".destination", has_text="Webhook")
        expect(item.locator("code")).to_have_text("json://••••••")
        expect(section.get_by_label("Apprise URL")).to_have_value("")
        assert SECRET not in page.content()

        item.get_by_role("button", name="Test Webhook").click()
        expect(item.locator("[data-role=message]")).to_have_text("The destination accepted the test message.")
        assert [payload["title"] for payload in receiver.payloads()] == ["Flarebot test"]
        receiver.status = 500
        item.get_by_role("button", name="Test Webhook").click()
        expect(item.locator("[data-role=message]")).to_contain_text("The destination did not accept the message")
        assert item.locator("[data-role=message]").get_attribute("data-kind") == "error"

    completed = section.get_by_label("A task run completed (each task can also ask for it: “Notify me”)")
    expect(completed).not_to_be_checked()
    completed.check()
    section.locator("#notify-quiet-enabled").check()
    section.locator("#notify-quiet-start").fill("22:30")
    section.locator("#notify-quiet-end").fill("06:45")
    section.locator("#notify-quiet-zone").fill("Europe/Berlin")
    section.get_by_role("button", name="Save", exact=True).click()
    expect(section.locator("#notify-settings-message")).to_have_text("Saved.")
    saved = api_get(page, "/api/notifications/settings/")
    assert saved["kinds"]["run_completed"] is True
    assert saved["quiet_hours"] == {"enabled": True, "start": "22:30", "end": "06:45", "time_zone": "Europe/Berlin"}
    expect(section.locator("#notify-no-failures")).to_be_visible()

    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(completed).to_be_checked()
    expect(section.locator("#notify-quiet-zone")).to_have_value("Europe/Berlin")
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] == width
    screenshot(page, f"settings-notifications-{width}")
    section.screenshot(path=str(ARTIFACTS / f"settings-notifications-section-{width}.png"))

    section.locator(".destination", has_text="Webhook").get_by_role("button", name="Delete Webhook").click()
    expect(section.locator(".destination")).to_have_count(0)
    expect(section.locator("#notify-empty")).to_be_visible()
    assert dialogs == ["confirm"]
    assert api_get(page, "/api/notifications/destinations/")["destinations"] == []
