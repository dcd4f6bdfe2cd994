"""Settings -> Notifications in Chromium against a loopback JSON webhook, at 1280 and 375 px; a task's "notify me"."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import Page, expect

from conversations.services import conversation_create
from flarebot.core.crypto import seal
from flarebot.core.models import Installation
from notifications import delivery, services
from notifications.models import Destination
from tasks import services as task_services
from tasks.models import Task
from tests.e2e.conftest import ARTIFACTS, screenshot
from tests.e2e.settings_support import Dialogs, api_get, dialogs, settings_page
from tests.notifications.conftest import question_opens
from tests.support.notify_receivers import http_receiver

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

__all__ = ["dialogs", "settings_page"]  # fixtures this module uses

SECRET = "e2e-s3cret-t0ken"


@pytest.mark.parametrize("width", [1280, 375])
def test_owner_adds_tests_tunes_and_deletes_a_destination(
    settings_page: Page, dialogs: Dialogs, width: int, monkeypatch: pytest.MonkeyPatch
) -> None:
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

    # A browser task asks while the webhook refuses every try: after the last one it shows as failed.
    [destination] = api_get(page, "/api/notifications/destinations/")["destinations"]
    with http_receiver() as refusing:
        refusing.status = 500
        Destination.objects.filter(id=destination["id"]).update(
            sealed=seal(
                f"json://127.0.0.1:{refusing.port}/hook/{SECRET}",
                server_secret=settings.SECRET_KEY,
                installation_id=Installation.objects.get().installation_id,
            )
        )
        # This test makes the tries itself, with a clock hours apart: the live worker is not
        # asked to (it would race them), and the sweep finds nothing due before the last.
        monkeypatch.setattr(services, "_enqueue", lambda *args, **kwargs: None)
        question_opens(conversation_create(name="Bank"))
        now = timezone.now()
        for n in range(delivery.MAX_ATTEMPTS):
            delivery.destination_deliver(destination_id=uuid.UUID(destination["id"]), now=now + timedelta(hours=n))
        assert len(refusing.received) == delivery.MAX_ATTEMPTS

    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    failure = section.locator("#notify-failures li")
    expect(failure).to_contain_text("A browser task waits for your approval → Webhook")
    expect(failure).to_contain_text("The destination did not accept the message (refused, or could not be reached)")
    expect(failure).to_contain_text("tried 5 times")
    expect(section.locator("#notify-no-failures")).to_be_hidden()
    assert SECRET not in page.content()
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


def test_a_tasks_notify_me_switch_is_saved_from_the_tasks_form(settings_page: Page) -> None:
    conversation = conversation_create(name="Reports")
    data = task_services.task_input_clean(
        name="Weekly summary",
        instructions="Summarise my week.",
        schedule={"kind": "cron", "expression": "0 9 * * 1", "timezone": "UTC"},
        enabled=True,
    )
    task, _ = task_services.task_create(task_id=uuid.uuid4(), conversation_id=conversation.id, data=data)
    page = settings_page
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    page.locator("#tasks-list .task").first.get_by_role("button", name="Edit").click()
    switch = page.locator("#task-form").get_by_label("Notify me when a run completes")
    expect(switch).not_to_be_checked()

    switch.check()
    page.get_by_role("button", name="Save task").click()

    expect(page.locator("#tasks-message")).to_have_text("Saved “Weekly summary”.")
    assert Task.objects.get(id=task.id).notify_on_completion is True
    page.locator("#tasks-list .task").first.get_by_role("button", name="Edit").click()
    expect(switch).to_be_checked()
