"""The chat page from the keyboard, in real Chromium at 1280 and 375 pixels: Escape stops a
streaming answer (after closing what is open), and the transcript scrolls with
PageUp/PageDown/Home/End once focused.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect

from tests.e2e import chat_support
from tests.e2e.chat_support import last_answer, open_conversation, paced, send
from tests.support.fake_providers import FakeProviders, Text
from tests.support.live_clients import OwnerClient, message_text

chat_page = chat_support.chat_page
live_owner = chat_support.live_owner
anthropic_key = chat_support.anthropic_key

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WIDTHS = [pytest.param(1280, id="1280px"), pytest.param(375, id="375px")]
POLL_SECONDS = 10.0
BOTTOM = (
    "(() => { const t = document.getElementById('transcript');"
    " return t.scrollHeight - t.scrollTop - t.clientHeight < 2; })()"
)


def wait_until(page: Page, script: str) -> None:
    """Poll a condition on the page (its CSP forbids Playwright's own string predicates)."""
    deadline = time.monotonic() + POLL_SECONDS
    while not page.evaluate(script):
        assert time.monotonic() < deadline, f"never true: {script}"
        page.wait_for_timeout(50)


def words_shown(page: Page) -> int:
    return len(re.findall(r"word\d{3}", last_answer(page).inner_text()))


@pytest.mark.parametrize("width", WIDTHS)
def test_it_stops_a_streaming_answer_with_escape_once_nothing_else_is_open(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    words = [f"word{i:03d} " for i in range(200)]  # 10 s if nobody stopped it
    fake_providers.script(paced(words, 0.05))
    conversation_id = live_owner.create_conversation("Escape")
    open_conversation(page, conversation_id)
    send(page, "Say two hundred words.")
    expect(last_answer(page)).to_contain_text("word005")

    # The first Escape closes what is open (the sidebar on a narrow screen, a rename on a
    # wide one) and leaves the answer streaming.
    if width < 760:
        toggle = page.get_by_role("button", name="Show conversations")
        toggle.click()
        expect(page.locator("#sidebar")).to_be_visible()
        page.keyboard.press("Escape")
        expect(page.locator("#sidebar")).to_be_hidden()
        expect(toggle).to_be_focused()
    else:
        page.get_by_role("button", name="Rename Escape").click()
        field = page.get_by_role("textbox", name="Conversation name")
        expect(field).to_be_focused()
        page.keyboard.press("Escape")
        expect(field).to_be_hidden()
    later = words_shown(page) + 25
    expect(last_answer(page)).to_contain_text(f"word{later:03d}")
    expect(page.locator(".turn-note.cancelled")).to_have_count(0)

    page.keyboard.press("Escape")

    expect(page.locator(".turn-note.cancelled")).to_have_text("Stopped.")
    expect(page.locator("#stop")).to_be_hidden()
    [_, assistant] = live_owner.messages(conversation_id)["messages"]
    stored = message_text(assistant)
    assert last_answer(page).inner_text().strip() == stored.strip()
    assert "".join(words).startswith(stored)
    assert "word199" not in stored
    assert [c["name"] for c in live_owner.api("GET", "/api/conversations/").json()["conversations"]] == ["Escape"]


@pytest.mark.parametrize("width", WIDTHS)
def test_it_scrolls_the_focused_transcript_with_page_and_home_keys(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 700})
    fake_providers.script([Text("\n\n".join(f"Paragraph {i} of a long answer." for i in range(150)))])
    conversation_id = live_owner.create_conversation("Scrolling")
    open_conversation(page, conversation_id)
    send(page, "Write a long answer.")
    expect(last_answer(page)).to_contain_text("Paragraph 149 of a long answer.")
    expect(page.locator("#stop")).to_be_hidden()
    transcript = page.get_by_role("region", name="Transcript")
    wait_until(page, BOTTOM)

    # Reached from the composer with Shift+Tab, like any other part of the page.
    page.get_by_role("textbox", name="Message").focus()
    page.keyboard.press("Shift+Tab")
    expect(transcript).to_be_focused()

    assert scroll_with(page, "Home") == 0
    one_page = scroll_with(page, "PageDown")
    two_pages = scroll_with(page, "PageDown")
    back_one = scroll_with(page, "PageUp")
    end = scroll_with(page, "End")
    assert 0 < one_page < two_pages < end
    assert back_one == pytest.approx(one_page, abs=2)
    assert page.evaluate(BOTTOM)
    expect(transcript).to_be_focused()


def scroll_with(page: Page, key: str) -> float:
    """Press a key and return where the transcript's (possibly smooth) scroll comes to rest."""
    page.evaluate(
        """() => {
            window.__scrolled = false;
            document.getElementById("transcript").addEventListener(
                "scrollend", () => { window.__scrolled = true; }, { once: true });
        }"""
    )
    page.keyboard.press(key)
    wait_until(page, "window.__scrolled === true")
    return float(page.evaluate("document.getElementById('transcript').scrollTop"))
