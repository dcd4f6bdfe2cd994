# mypy: disable-error-code="union-attr,arg-type,index,operator,misc"
"""The Tasks section of the settings page in Chromium: create, next runs in the right zone, edit with
a version conflict, enable/disable, run now with its history and link, delete.

The browser runs in Europe/Berlin, so the zone picker's default and the times shown can be
told apart from the server's UTC. Served under the app's Content-Security-Policy (the
`settings_page` fixture of test_settings.py). Changes made "elsewhere" go through the services.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from conversations.models import Message
from conversations.services import conversation_create
from tasks import services
from tasks.models import Task, TaskRun, TaskState
from tests.e2e.conftest import STEP_TIMEOUT_MS, screenshot
from tests.e2e.settings_support import dialogs, patient_expect, settings_page
from tests.support.live import LiveStack

__all__ = ["dialogs", "patient_expect", "settings_page"]

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
def context(browser: Browser, live_stack: LiveStack) -> Iterator[BrowserContext]:
    context = browser.new_context(
        base_url=live_stack.base_url, viewport={"width": 1280, "height": 800}, timezone_id="Europe/Berlin"
    )
    context.set_default_timeout(STEP_TIMEOUT_MS)
    yield context
    context.close()


def tasks_listed(page: Page) -> Locator:
    return page.locator("#tasks-list .task")


def form(page: Page) -> Locator:
    return page.locator("#task-form")


def reload(page: Page) -> None:
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")


def make(conversation_id: uuid.UUID, name: str = "Weekly summary", **schedule: str) -> Task:
    data = services.task_input_clean(
        name=name,
        instructions="Summarise my week.",
        schedule=schedule or {"kind": "cron", "expression": "0 9 * * 1", "timezone": "Europe/Berlin"},
        enabled=True,
    )
    task, _ = services.task_create(task_id=uuid.uuid4(), conversation_id=conversation_id, data=data)
    return task


def test_owner_creates_a_repeating_task_in_their_zone(settings_page: Page) -> None:
    conversation = conversation_create(name="Morning news")
    page = settings_page
    reload(page)
    expect(page.locator("#tasks-count")).to_have_text("0 of 100 tasks")
    expect(page.locator("#tasks-empty")).to_be_visible()

    page.get_by_role("button", name="New task").click()
    expect(form(page).get_by_label("Time zone")).to_have_value("Europe/Berlin")  # the browser's
    expect(form(page).get_by_label("Conversation")).to_have_value(str(conversation.id))
    form(page).get_by_label("Name").fill("Headlines")
    form(page).get_by_label("Instructions").fill("Give me three headlines.")
    form(page).get_by_label("Cron expression").fill("30 7 * * 1-5")
    page.get_by_role("button", name="Save task").click()

    expect(page.locator("#tasks-message")).to_have_text("Saved “Headlines”.")
    expect(tasks_listed(page)).to_have_count(1)
    task = tasks_listed(page).first
    expect(task.locator("[data-role=schedule]")).to_have_text("Repeats 30 7 * * 1-5 in Europe/Berlin")
    [stored] = Task.objects.filter(state=TaskState.ACTIVE)
    assert (stored.name, stored.cron_expression, stored.timezone, stored.conversation_id) == (
        "Headlines",
        "30 7 * * 1-5",
        "Europe/Berlin",
        conversation.id,
    )
    # Next run and the preview are shown in the task's zone, as wall-clock 07:30 on weekdays.
    next_time = task.locator("[data-role=next] time")
    expect(next_time).to_contain_text("07:30")
    task.get_by_text("Next 5 runs").click()
    upcoming = task.locator("[data-role=upcoming] time")
    expect(upcoming).to_have_count(5)
    for n in range(5):
        expect(upcoming.nth(n)).to_contain_text("07:30")
        instant = datetime.fromisoformat(upcoming.nth(n).get_attribute("datetime").replace("Z", "+00:00"))
        assert instant.astimezone(BERLIN).strftime("%H:%M") == "07:30"
        assert instant.astimezone(BERLIN).weekday() < 5
    expect(page.locator("#tasks-count")).to_have_text("1 of 100 tasks")
    screenshot(page, "settings-tasks")


def test_owner_creates_a_one_off_read_in_the_chosen_zone(settings_page: Page) -> None:
    conversation_create(name="Reminders")
    page = settings_page
    reload(page)
    when = (timezone.now() + timedelta(days=3)).astimezone(BERLIN).replace(hour=10, minute=15, second=0, microsecond=0)

    page.get_by_role("button", name="New task").click()
    form(page).get_by_label("Name").fill("Call the plumber")
    form(page).get_by_label("Instructions").fill("Remind me to call the plumber.")
    form(page).get_by_label("Once").check()
    form(page).get_by_label("Date and time").fill(when.strftime("%Y-%m-%dT%H:%M:%S"))
    form(page).get_by_label("Time zone").select_option("America/New_York")
    page.get_by_role("button", name="Save task").click()

    expect(tasks_listed(page)).to_have_count(1)
    stored = Task.objects.get(state=TaskState.ACTIVE)
    # 10:15 read as New York's wall clock, not Berlin's.
    assert stored.once_at == when.replace(tzinfo=ZoneInfo("America/New_York"))
    expect(tasks_listed(page).first.locator("[data-role=state]")).to_have_text("Enabled")


def test_a_refused_schedule_keeps_the_form_and_says_what_is_accepted(settings_page: Page) -> None:
    conversation_create(name="Anything")
    page = settings_page
    reload(page)
    page.get_by_role("button", name="New task").click()
    form(page).get_by_label("Name").fill("Bad")
    form(page).get_by_label("Instructions").fill("x")
    form(page).get_by_label("Cron expression").fill("0 9 * * MONDAY")
    page.get_by_role("button", name="Save task").click()
    expect(page.locator("#task-form-message")).to_contain_text("'MONDAY' is not a name of a month or day")
    expect(page.locator("#task-form-message")).to_contain_text("MON-FRI")  # what is accepted
    expect(form(page).get_by_label("Cron expression")).to_have_value("0 9 * * MONDAY")
    assert Task.objects.count() == 0
    form(page).get_by_label("Cron expression").fill("0 9 * * MON")  # a day's name, as cron writes it
    page.get_by_role("button", name="Save task").click()
    expect(tasks_listed(page)).to_have_count(1)


def test_an_edit_that_lost_a_race_shows_the_conflict_and_saves_on_purpose(settings_page: Page) -> None:
    conversation = conversation_create(name="Edits")
    task = make(conversation.id)
    page = settings_page
    reload(page)
    item = tasks_listed(page).first
    item.get_by_role("button", name="Edit").click()
    form(page).get_by_label("Name").fill("Mine")
    services.task_update(
        task_id=task.id,
        expected_version=1,
        name="Theirs",
        instructions="Summarise my week.",
        schedule={"kind": "cron", "expression": "0 9 * * 1", "timezone": "Europe/Berlin"},
        enabled=True,
    )
    page.get_by_role("button", name="Save task").click()
    expect(page.locator("#task-form-message")).to_have_text("Not saved: the task was changed elsewhere.")
    expect(page.locator("#task-conflict")).to_be_visible()
    expect(form(page).get_by_label("Name")).to_have_value("Mine")
    assert Task.objects.get(id=task.id).name == "Theirs"
    page.get_by_role("button", name="Save task").click()
    expect(item.locator("[data-role=name]")).to_have_text("Mine")
    assert (Task.objects.get(id=task.id).name, Task.objects.get(id=task.id).version) == ("Mine", 3)


def test_owner_disables_runs_now_follows_the_history_link_and_deletes(settings_page: Page) -> None:
    conversation = conversation_create(name="Runs")
    task = make(conversation.id, name="Daily digest")
    page = settings_page
    reload(page)
    item = tasks_listed(page).first
    item.get_by_role("button", name="Disable").click()
    expect(item.locator("[data-role=state]")).to_have_text("Disabled")
    expect(item.locator("[data-role=next]")).to_have_text("Not scheduled while disabled.")
    assert Task.objects.get(id=task.id).enabled is False

    item.get_by_role("button", name="Run now").click()
    expect(item.locator("[data-role=message]")).to_contain_text("Started")
    [run] = TaskRun.objects.filter(task_id=task.id)
    assert run.source == "manual"
    item.get_by_role("button", name="History").click()
    rows = item.locator("[data-role=runs] li")
    expect(rows).to_have_count(1)
    link = rows.first.get_by_role("link")
    expect(link).to_have_attribute("href", f"/?c={conversation.id}#turn-{run.turn_id}")
    assert Message.objects.filter(turn_id=run.turn_id, role="user").exists()
    screenshot(page, "settings-tasks-history")

    link.click()
    page.wait_for_url(f"**/?c={conversation.id}#turn-{run.turn_id}")
    label = page.locator(f"#turn-{run.turn_id} .msg.user .source")
    expect(label).to_have_text("Scheduled task: Daily digest")
    expect(page.locator(f"#turn-{run.turn_id} .msg.user .bubble")).to_have_text("Summarise my week.")
    screenshot(page, "chat-task-run")

    page.goto("/settings/")
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    item = tasks_listed(page).first
    item.get_by_role("button", name="Delete").click()
    item.get_by_role("button", name="Delete task").click()
    expect(page.locator("#tasks-message")).to_have_text("Task “Daily digest” deleted.")
    expect(tasks_listed(page)).to_have_count(0)
    assert Task.objects.get(id=task.id).state == TaskState.DELETED


def test_the_section_fits_a_narrow_screen(settings_page: Page) -> None:
    conversation = conversation_create(name="Phone")
    make(conversation.id, name="A task with a rather long name that has to wrap on a phone screen")
    page = settings_page
    page.set_viewport_size({"width": 375, "height": 800})
    reload(page)
    expect(tasks_listed(page)).to_have_count(1)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375
    screenshot(page, "settings-tasks-375")
