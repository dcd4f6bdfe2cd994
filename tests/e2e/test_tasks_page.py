# mypy: disable-error-code="union-attr,arg-type,index,operator,misc"
"""The Tasks section of the settings page in Chromium: the first task in a new conversation, presets,
schedules in words with their next runs in the task's zone, one-offs in their own zone, refusals in
words, edit with a version conflict, enable/disable, run now with its history and link, delete, and the
list following runs and fires without a reload.

The browser runs in Europe/Berlin (or, where a test parametrizes `browser_zone`, elsewhere), so
the zone picker's default and the times shown can be told apart from the server's UTC. Served
under the app's Content-Security-Policy (the `settings_page` fixture of test_settings.py).
Changes made "elsewhere" go through the services.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from django_celery_beat.models import ClockedSchedule
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from conversations.models import Conversation, Message
from conversations.services import conversation_create
from tasks import jobs, services
from tasks.models import Task, TaskRun, TaskState
from tasks.schedule import instant_text
from tasks.selectors import task_view
from tests.e2e.conftest import STEP_TIMEOUT_MS, screenshot
from tests.e2e.settings_support import dialogs, settings_page
from tests.support.fake_providers import FakeProviders, Hold, Text
from tests.support.live import LiveStack

__all__ = ["dialogs", "settings_page"]

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.fixture
def browser_zone() -> str:
    return "Europe/Berlin"


@pytest.fixture
def context(browser: Browser, live_stack: LiveStack, browser_zone: str) -> Iterator[BrowserContext]:
    context = browser.new_context(
        base_url=live_stack.base_url, viewport={"width": 1280, "height": 800}, timezone_id=browser_zone
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


def next_runs(task: Locator) -> Locator:
    return task.locator("[data-role=upcoming] time")


def instant_of(time: Locator) -> datetime:
    return datetime.fromisoformat(time.get_attribute("datetime").replace("Z", "+00:00"))


def test_the_first_task_goes_to_a_new_conversation_named_after_it(settings_page: Page) -> None:
    page = settings_page
    reload(page)
    expect(page.locator("#tasks-empty")).to_be_visible()

    page.get_by_role("button", name="New task").click()
    conversation = form(page).get_by_label("Conversation")
    expect(conversation).to_have_value("new")  # the default, and the only choice yet
    expect(conversation.locator("option")).to_have_text(["A new conversation"])
    expect(page.locator("#task-conversation-hint")).to_have_text("Created with the task, and named after it.")
    expect(form(page).get_by_label("Schedule")).to_have_value("daily")
    form(page).get_by_label("Name").fill("Morning headlines")
    form(page).get_by_label("Instructions").fill("Give me three headlines.")
    form(page).get_by_label("Time", exact=True).fill("07:30")
    expect(page.locator("#task-preset-cron")).to_have_text("Saved as the cron expression 30 7 * * *.")
    page.get_by_role("button", name="Save task").click()

    expect(page.locator("#tasks-message")).to_have_text("Saved “Morning headlines” in a new conversation of that name.")
    expect(tasks_listed(page)).to_have_count(1)
    expect(tasks_listed(page).first.locator("[data-role=schedule]")).to_have_text("Every day at 07:30, Europe/Berlin")
    [made] = Conversation.objects.all()
    [stored] = Task.objects.filter(state=TaskState.ACTIVE)
    assert (made.name, stored.conversation_id, stored.cron_expression) == ("Morning headlines", made.id, "30 7 * * *")
    # The next task can go to it, or to another new one.
    page.get_by_role("button", name="New task").click()
    expect(conversation).to_have_value("new")
    expect(conversation.locator("option")).to_have_text(["A new conversation", "Morning headlines"])
    conversation.select_option(label="Morning headlines")
    expect(page.locator("#task-conversation-hint")).to_be_hidden()
    screenshot(page, "settings-tasks-new-conversation")


def test_owner_creates_a_repeating_task_in_their_zone(settings_page: Page) -> None:
    conversation = conversation_create(name="Morning news")
    page = settings_page
    reload(page)
    expect(page.locator("#tasks-count")).to_have_text("0 of 100 tasks")

    page.get_by_role("button", name="New task").click()
    expect(form(page).get_by_label("Time zone")).to_have_value("Europe/Berlin")  # the browser's
    form(page).get_by_label("Conversation").select_option(label="Morning news")
    form(page).get_by_label("Name").fill("Headlines")
    form(page).get_by_label("Instructions").fill("Give me three headlines.")
    form(page).get_by_label("Schedule").select_option(label="Custom (cron)")
    form(page).get_by_label("Cron expression").fill("30 7 * * MON-FRI")
    page.get_by_role("button", name="Save task").click()

    expect(page.locator("#tasks-message")).to_have_text("Saved “Headlines”.")
    expect(tasks_listed(page)).to_have_count(1)
    task = tasks_listed(page).first
    # In words, not as `30 7 * * 1-5`.
    expect(task.locator("[data-role=schedule]")).to_have_text("Weekdays at 07:30, Europe/Berlin")
    [stored] = Task.objects.filter(state=TaskState.ACTIVE)
    assert (stored.name, stored.cron_expression, stored.timezone, stored.conversation_id) == (
        "Headlines",
        "30 7 * * 1-5",
        "Europe/Berlin",
        conversation.id,
    )
    # The next three runs, in the task's zone, as wall-clock 07:30 on weekdays.
    expect(task.locator("[data-role=upcoming-label]")).to_have_text("Next runs")
    expect(next_runs(task)).to_have_count(3)
    for n in range(3):
        expect(next_runs(task).nth(n)).to_contain_text("07:30")
        assert instant_of(next_runs(task).nth(n)).astimezone(BERLIN).strftime("%H:%M") == "07:30"
        assert instant_of(next_runs(task).nth(n)).astimezone(BERLIN).weekday() < 5
    expect(page.locator("#tasks-count")).to_have_text("1 of 100 tasks")
    screenshot(page, "settings-tasks")


@pytest.mark.parametrize("browser_zone", ["Asia/Tokyo"])
def test_the_list_says_each_rule_in_words_with_its_next_three_runs_in_its_zone(settings_page: Page) -> None:
    conversation = conversation_create(name="Routines")
    make(conversation.id, "Standup", kind="cron", expression="0 8 * * 1-5", timezone="Europe/Berlin")
    make(conversation.id, "First Monday", kind="cron", expression="0 9 1-7 * 1", timezone="America/New_York")
    make(conversation.id, "Backups", kind="cron", expression="0 */6 * * *", timezone="UTC")
    page = settings_page
    reload(page)
    expect(tasks_listed(page)).to_have_count(3)
    backups, first_monday, standup = (tasks_listed(page).nth(n) for n in range(3))  # newest first
    expect(standup.locator("[data-role=schedule]")).to_have_text("Weekdays at 08:00, Europe/Berlin")
    expect(backups.locator("[data-role=schedule]")).to_have_text("Every 6 hours, UTC")
    # Without a plain wording: the cron text.
    expect(first_monday.locator("[data-role=schedule]")).to_have_text("Cron 0 9 1-7 * 1, America/New_York")
    for task, zone, clock in (
        (standup, "Europe/Berlin", {"08:00"}),
        (first_monday, "America/New_York", {"09:00"}),
        (backups, "UTC", {"00:00", "06:00", "12:00", "18:00"}),
    ):
        expect(next_runs(task)).to_have_count(3)
        for n in range(3):
            at = instant_of(next_runs(task).nth(n)).astimezone(ZoneInfo(zone))
            assert at.strftime("%H:%M") in clock
            expect(next_runs(task).nth(n)).to_contain_text(at.strftime("%H:%M"))  # not Tokyo's clock
    stored = Task.objects.get(name="Standup")
    assert [instant_of(next_runs(standup).nth(n)) for n in range(3)] == [
        datetime.fromisoformat(at.replace("Z", "+00:00")) for at in task_view(stored)["upcoming"][:3]
    ]
    screenshot(page, "settings-tasks-words")


def test_a_preset_saves_its_cron_and_opens_again_as_that_preset(settings_page: Page) -> None:
    conversation_create(name="Plants")
    page = settings_page
    reload(page)
    page.get_by_role("button", name="New task").click()
    form(page).get_by_label("Conversation").select_option(label="Plants")
    form(page).get_by_label("Name").fill("Water the plants")
    form(page).get_by_label("Instructions").fill("Remind me to water the plants.")
    form(page).get_by_label("Schedule").select_option(label="Every week on a day")
    form(page).get_by_label("Day").select_option(label="Wednesday")
    form(page).get_by_label("Time", exact=True).fill("18:45")
    page.get_by_role("button", name="Save task").click()

    item = tasks_listed(page).first
    expect(item.locator("[data-role=schedule]")).to_have_text("Every Wednesday at 18:45, Europe/Berlin")
    stored = Task.objects.get(state=TaskState.ACTIVE)
    assert (stored.schedule_kind, stored.cron_expression, stored.timezone) == ("cron", "45 18 * * 3", "Europe/Berlin")

    item.get_by_role("button", name="Edit").click()
    expect(form(page).get_by_label("Schedule")).to_have_value("weekly")
    expect(form(page).get_by_label("Day")).to_have_value("3")
    expect(form(page).get_by_label("Time", exact=True)).to_have_value("18:45")
    expect(form(page).get_by_label("Cron expression")).to_be_hidden()
    form(page).get_by_label("Schedule").select_option(label="Every N hours")
    form(page).get_by_label("Every", exact=True).select_option(label="6 hours")
    expect(page.locator("#task-preset-cron")).to_have_text("Saved as the cron expression 0 */6 * * *.")
    page.get_by_role("button", name="Save task").click()
    expect(item.locator("[data-role=schedule]")).to_have_text("Every 6 hours, Europe/Berlin")
    assert Task.objects.get(id=stored.id).cron_expression == "0 */6 * * *"

    item.get_by_role("button", name="Edit").click()
    expect(form(page).get_by_label("Schedule")).to_have_value("hours")
    expect(form(page).get_by_label("Every", exact=True)).to_have_value("6")
    # Custom starts from the preset it leaves.
    form(page).get_by_label("Schedule").select_option(label="Custom (cron)")
    expect(form(page).get_by_label("Cron expression")).to_have_value("0 */6 * * *")
    page.get_by_role("button", name="Cancel").click()

    # An expression written another way that is a preset's opens as that preset.
    services.task_update(
        task_id=stored.id,
        expected_version=2,
        name="Water the plants",
        instructions="Remind me to water the plants.",
        schedule={"kind": "cron", "expression": "0 8 * * MON-FRI", "timezone": "Europe/Berlin"},
        enabled=True,
    )
    reload(page)
    tasks_listed(page).first.get_by_role("button", name="Edit").click()
    expect(form(page).get_by_label("Schedule")).to_have_value("weekdays")
    expect(form(page).get_by_label("Time", exact=True)).to_have_value("08:00")
    screenshot(page, "settings-tasks-preset")


@pytest.mark.parametrize("browser_zone", ["America/New_York"])
def test_a_one_off_is_shown_and_edited_in_its_own_zone_with_the_browsers_time_beside(settings_page: Page) -> None:
    conversation = conversation_create(name="Reminders")
    when = (timezone.now() + timedelta(days=3)).astimezone(BERLIN).replace(hour=10, minute=15, second=0, microsecond=0)
    task = make(conversation.id, "Call the plumber", kind="once", at=when.isoformat(), timezone="Europe/Berlin")
    new_york = when.astimezone(ZoneInfo("America/New_York"))
    page = settings_page
    reload(page)
    item = tasks_listed(page).first
    schedule = item.locator("[data-role=schedule]")
    expect(schedule).to_contain_text(f"Once, {when:%a} {when.day} {when:%b %Y} at 10:15, Europe/Berlin")
    expect(schedule.locator(".your-time")).to_contain_text("Your time: ")
    expect(schedule.locator(".your-time time")).to_contain_text(new_york.strftime("%H:%M"))
    expect(item.locator("[data-role=upcoming-label]")).to_have_text("Next run")
    expect(next_runs(item)).to_have_count(1)
    expect(next_runs(item).first).to_contain_text("10:15")  # Berlin's clock, not New York's
    screenshot(page, "settings-tasks-one-off-zone")

    item.get_by_role("button", name="Edit").click()
    expect(form(page).get_by_label("Schedule")).to_have_value("once")
    expect(form(page).get_by_label("Time zone")).to_have_value("Europe/Berlin")
    expect(form(page).get_by_label("Date and time")).to_have_value(re.compile(rf"^{when:%Y-%m-%d}T10:15(:00)?$"))
    beside = page.locator("#task-at-local")
    expect(beside).to_contain_text("Your time: ")
    expect(beside).to_contain_text(new_york.strftime("%H:%M"))
    later = when.replace(hour=11, minute=30)
    form(page).get_by_label("Date and time").fill(later.strftime("%Y-%m-%dT%H:%M:%S"))
    expect(beside).to_contain_text(later.astimezone(ZoneInfo("America/New_York")).strftime("%H:%M"))
    page.get_by_role("button", name="Save task").click()
    expect(schedule).to_contain_text("at 11:30, Europe/Berlin")
    stored = Task.objects.get(id=task.id)
    assert (stored.once_at, stored.timezone) == (later, "Europe/Berlin")

    # In the browser's own zone, nothing is put beside it.
    item.get_by_role("button", name="Edit").click()
    form(page).get_by_label("Time zone").select_option("America/New_York")
    expect(beside).to_be_hidden()


def test_owner_creates_a_one_off_read_in_the_chosen_zone(settings_page: Page) -> None:
    conversation_create(name="Reminders")
    page = settings_page
    reload(page)
    when = (timezone.now() + timedelta(days=3)).astimezone(BERLIN).replace(hour=10, minute=15, second=0, microsecond=0)

    page.get_by_role("button", name="New task").click()
    form(page).get_by_label("Conversation").select_option(label="Reminders")
    form(page).get_by_label("Name").fill("Call the plumber")
    form(page).get_by_label("Instructions").fill("Remind me to call the plumber.")
    form(page).get_by_label("Schedule").select_option(label="Once")
    form(page).get_by_label("Date and time").fill(when.strftime("%Y-%m-%dT%H:%M:%S"))
    form(page).get_by_label("Time zone").select_option("America/New_York")
    expect(page.locator("#task-at-local")).to_contain_text("Your time: ")  # Berlin's, the browser's
    page.get_by_role("button", name="Save task").click()

    expect(tasks_listed(page)).to_have_count(1)
    stored = Task.objects.get(state=TaskState.ACTIVE)
    # 10:15 read as New York's wall clock, not Berlin's, and kept in New York.
    assert stored.once_at == when.replace(tzinfo=ZoneInfo("America/New_York"))
    assert stored.timezone == "America/New_York"
    item = tasks_listed(page).first
    expect(item.locator("[data-role=state]")).to_have_text("Enabled")
    expect(item.locator("[data-role=schedule]")).to_contain_text("at 10:15, America/New_York")
    berlin = stored.once_at.astimezone(BERLIN).strftime("%H:%M")
    expect(item.locator("[data-role=schedule] .your-time")).to_contain_text(berlin)


def test_a_refused_schedule_keeps_the_form_and_says_what_is_wrong_in_words(settings_page: Page) -> None:
    page = settings_page
    reload(page)
    page.get_by_role("button", name="New task").click()
    form(page).get_by_label("Name").fill("Bad")
    form(page).get_by_label("Instructions").fill("x")
    form(page).get_by_label("Schedule").select_option(label="Custom (cron)")
    cron = form(page).get_by_label("Cron expression")
    cron.fill("0 25 * * *")
    page.get_by_role("button", name="Save task").click()
    message = page.locator("#task-form-message")
    expect(message).to_have_text("The hour 25 is outside 0-23.")  # no field path, no code marks
    expect(cron).to_have_attribute("aria-invalid", "true")
    expect(cron).to_be_focused()
    cron.fill("0 9 * * MONDAY")
    page.get_by_role("button", name="Save task").click()
    expect(message).to_contain_text("The day of the week “MONDAY” is not a day's name (SUN-SAT)")
    expect(message).to_contain_text("MON-FRI")  # what is accepted
    assert "`" not in message.inner_text()
    expect(cron).to_have_value("0 9 * * MONDAY")
    assert Task.objects.count() == 0
    assert Conversation.objects.count() == 0  # a refused task made no conversation
    screenshot(page, "settings-tasks-error")
    cron.fill("0 9 * * MON")  # a day's name, as cron writes it
    page.get_by_role("button", name="Save task").click()
    expect(tasks_listed(page)).to_have_count(1)
    expect(cron).not_to_have_attribute("aria-invalid", "true")
    expect(tasks_listed(page).first.locator("[data-role=schedule]")).to_have_text(
        "Every Monday at 09:00, Europe/Berlin"
    )


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


def armed_at(task: Task, at: datetime) -> None:
    """Arm the task at `at`, an occurrence that just came, as if beat's fire were on its way (beat is not told)."""
    Task.objects.filter(id=task.id).update(armed_at=at)
    ClockedSchedule.objects.filter(periodictask__id=task.periodic_task_id).update(clocked_time=at)


def test_last_run_next_runs_and_history_follow_the_server_without_a_reload(
    settings_page: Page, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    conversation = conversation_create(name="Following")
    came = timezone.now().replace(second=0, microsecond=0)  # today's occurrence of a task daily at this minute
    daily = f"{came.minute} {came.hour} * * *"
    task = make(conversation.id, name="Daily digest", kind="cron", expression=daily, timezone="UTC")
    armed_at(task, came)
    answering = Hold()
    fake_providers.script([Text("The digest.")], [answering, Text("The digest, now.")])
    page = settings_page
    reload(page)
    item = tasks_listed(page).first
    expect(next_runs(item)).to_have_count(3)  # today's, unless reconciliation fired it first (a minute late)
    previous = item.locator("[data-role=previous]")

    jobs.task_fire(str(task.id))  # beat's fire, here: the occurrence runs and the next one is armed

    expect(next_runs(item).first).to_have_attribute("datetime", instant_text(came + timedelta(days=1)))
    expect(previous).to_contain_text(re.compile(r"^Last run: Completed .* · scheduled · "))

    item.get_by_role("button", name="Run now").click()
    expect(item.locator("[data-role=message]")).to_contain_text("Started")
    item.get_by_role("button", name="History").click()
    rows = item.locator("[data-role=runs] li")
    expect(rows).to_have_count(2)
    expect(previous).to_contain_text(re.compile(r"^Last run: (Pending|Running) .* · run now · "))
    answering.release()
    expect(previous).to_contain_text(re.compile(r"^Last run: Completed .* · run now · "))
    expect(rows.first).to_contain_text(re.compile(r"^Completed .* · run now · "))
    expect(rows.last).to_contain_text(re.compile(r"^Completed .* · scheduled · "))


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("browser_zone", ["America/New_York"])
def test_the_section_fits_a_narrow_screen(settings_page: Page, scheme: str) -> None:
    conversation = conversation_create(name="Phone")
    make(conversation.id, name="A task with a rather long name that has to wrap on a phone screen")
    when = (timezone.now() + timedelta(days=3)).replace(microsecond=0)
    make(conversation.id, "Once in Berlin", kind="once", at=when.isoformat(), timezone="Europe/Berlin")
    page = settings_page
    page.emulate_media(color_scheme=scheme)
    for width in (1280, 375):
        page.set_viewport_size({"width": width, "height": 800})
        reload(page)
        expect(tasks_listed(page)).to_have_count(2)
        expect(tasks_listed(page).first.locator(".your-time")).to_be_visible()
        tasks_listed(page).first.get_by_role("button", name="Edit").click()
        expect(page.locator("#task-at-local")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        form(page).get_by_label("Schedule").select_option(label="Every week on a day")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        screenshot(page, f"settings-tasks-{width}-{scheme}")
