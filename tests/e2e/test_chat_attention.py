"""Unread marks and the needs-you list on the chat page, in two tabs of real Chromium, at 1280 and 375 pixels.

Two tabs of the same owner stay in agreement through the server: a count one tab clears
(by showing the conversation) leaves the other tab's sidebar and title too, and a question
one tab answers from the needs-you list leaves the other tab's list.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.chat_support import no_sideways_scroll, open_conversation, send
from tests.e2e.conftest import screenshot
from tests.support.browser_tasks import step
from tests.support.fake_providers import Call, FakeProviders, Text
from tests.support.live_clients import OwnerClient
from tests.support.web_fixtures import FixtureWeb, fixture_web_start

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WIDTHS = [pytest.param(1280, id="1280px"), pytest.param(375, id="375px")]
TASK_MS = 60_000


@pytest.fixture
def web() -> Iterator[FixtureWeb]:
    server = fixture_web_start()
    server.reset()
    yield server
    server.reset()


@pytest.fixture
def second_tab(context: BrowserContext, chat_page: Page) -> Iterator[Page]:
    """Another tab of the same signed-in browser."""
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    page.goto("about:blank")
    assert errors == []


def row(page: Page, conversation_id: str):
    return page.locator(f'#conversation-list .conversation[data-conversation-id="{conversation_id}"]')


def show_sidebar(page: Page, width: int) -> None:
    if width < 760:
        page.get_by_role("button", name="Show conversations").click()
        expect(page.locator("#sidebar")).to_have_css("transform", "none")


def hide_sidebar(page: Page, width: int) -> None:
    if width < 760:
        page.keyboard.press("Escape")
        expect(page.locator("#sidebar")).to_be_hidden()


def ask_elsewhere(live_owner: OwnerClient, fake_providers: FakeProviders, conversation_id: str, answer: str) -> None:
    """A message answered in a conversation no tab shows (as a task run's is)."""
    fake_providers.script([Text(answer)])
    response = live_owner.api(
        "POST",
        f"/api/conversations/{conversation_id}/messages/",
        json={"request_id": str(uuid.uuid4()), "text": "What is new today?"},
    )
    assert response.status_code == 202, response.text


@pytest.mark.parametrize("width", WIDTHS)
def test_unread_marks_and_the_title_agree_in_two_tabs(
    chat_page: Page,
    second_tab: Page,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    width: int,
) -> None:
    errands = live_owner.create_conversation("Errands")
    news = live_owner.create_conversation("News")
    tabs = [chat_page, second_tab]
    for tab in tabs:
        tab.set_viewport_size({"width": width, "height": 800})
        open_conversation(tab, errands)
        expect(tab).to_have_title("Errands · Flarebot")

    ask_elsewhere(live_owner, fake_providers, news, "Two new messages arrived.")

    for tab in tabs:
        expect(tab).to_have_title("(1) Errands · Flarebot")
        if width < 760:
            expect(tab.locator("#sidebar-toggle")).to_have_class(re.compile(r"\bhas-unread\b"))
    show_sidebar(chat_page, width)
    expect(row(chat_page, news).locator(".unread-count")).to_have_text("1 unread")
    expect(row(chat_page, errands).locator(".unread-count")).to_have_count(0)
    no_sideways_scroll(chat_page)
    screenshot(chat_page, f"unread-{width}")

    ask_elsewhere(live_owner, fake_providers, news, "And one more.")
    expect(row(chat_page, news).locator(".unread-count")).to_have_text("2 unread")
    expect(second_tab).to_have_title("(2) Errands · Flarebot")

    # Opening it in one tab reads it: the other tab's mark and title follow.
    row(chat_page, news).locator(".conversation-link").click()
    expect(chat_page.locator("#transcript .msg.assistant").last).to_have_text("And one more.")
    expect(chat_page).to_have_title("News · Flarebot")
    expect(second_tab).to_have_title("Errands · Flarebot")
    show_sidebar(second_tab, width)
    expect(row(second_tab, news).locator(".unread-count")).to_have_count(0)
    expect(second_tab.locator("#sidebar-toggle")).not_to_have_class(re.compile(r"\bhas-unread\b"))

    # The server holds the mark: a new page agrees.
    second_tab.reload()
    expect(row(second_tab, errands)).to_be_attached()
    expect(second_tab).to_have_title("Errands · Flarebot")
    listed = {c["id"]: c["unread"] for c in live_owner.api("GET", "/api/conversations/").json()["conversations"]}
    assert listed == {errands: 0, news: 0}


@pytest.mark.parametrize("width", WIDTHS)
def test_the_needs_you_list_opens_the_question_and_answering_it_clears_both_tabs(
    chat_page: Page,
    second_tab: Page,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    web: FixtureWeb,
    width: int,
) -> None:
    kettle = live_owner.create_conversation("Kettle")
    other = live_owner.create_conversation("Other things")
    for tab in (chat_page, second_tab):
        tab.set_viewport_size({"width": width, "height": 800})
    open_conversation(chat_page, kettle)
    open_conversation(second_tab, other)
    for tab in (chat_page, second_tab):
        expect(tab.locator("#attention")).to_be_hidden()

    proposal = {"goal": "Buy one blue kettle.", "start_url": web.url("/shop"), "restrictions": []}
    fake_providers.script([Call("toolu_propose", "browser_task_propose", proposal)], [Text("Press Start.")])
    send(chat_page, "Buy me a kettle in the browser.")
    card = chat_page.locator(".task-card").last
    fake_providers.script(step("click", element=1))
    card.get_by_role("button", name="Start").click()
    expect(card.locator(".task-question-text")).to_contain_text("Nothing was sent", timeout=TASK_MS)

    # Both tabs count it; the other tab's list says what and where.
    for tab in (chat_page, second_tab):
        expect(tab.locator("#attention-count")).to_have_text("1")
    toggle = second_tab.locator("#attention summary")
    toggle.click()
    entry = second_tab.locator("#attention-list .attention-link")
    expect(entry).to_have_count(1)
    expect(entry.locator(".attention-kind")).to_have_text("Question")
    expect(entry.locator(".attention-title")).to_contain_text("Nothing was sent")
    expect(entry.locator(".attention-where")).to_have_text("Kettle")
    menu = second_tab.locator(".attention-menu")
    menu_box = menu.bounding_box()
    assert menu_box is not None
    assert menu_box["x"] >= 0
    assert menu_box["x"] + menu_box["width"] <= width
    screenshot(second_tab, f"needs-you-{width}")

    entry.click()
    expect(second_tab).to_have_url(re.compile(rf"/\?c={kettle}#browser-task-[0-9a-f-]+$"))
    linked = second_tab.locator(".task-card.linked")
    expect(linked).to_be_visible()
    expect(linked.locator(".task-question-text")).to_contain_text("Nothing was sent")
    expect(linked).to_be_in_viewport()
    no_sideways_scroll(second_tab)

    point = linked.locator(".task-question").get_attribute("data-point-id")
    fake_providers.script(
        step("click", element=1, critical_point_id=point),
        step("finish", outcome="completed", summary="The kettle is in the cart."),
    )
    linked.get_by_role("button", name="Approve").click()

    # The answer goes through the socket, the task resumes in the worker, and both lists are read
    # again: allow for a loaded machine.
    for tab in (chat_page, second_tab):
        expect(tab.locator("#attention")).to_be_hidden(timeout=TASK_MS)
    expect(linked.locator(".task-outcome")).to_have_text("Completed: The kettle is in the cart.", timeout=TASK_MS)
    assert live_owner.api("GET", "/api/attention/").json() == {"items": []}
