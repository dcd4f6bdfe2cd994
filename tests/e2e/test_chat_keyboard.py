"""The chat page from the keyboard, in real Chromium at 1280 and 375 pixels: Escape stops a
streaming answer (after closing what is open), the transcript scrolls with
PageUp/PageDown/Home/End once focused, and every daily feature (new chat, message and code
actions, Edit, export, the model, search) works with the keyboard alone.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, Route, expect

from tests.e2e.chat_support import (
    LOOKS,
    apply_look,
    clipboard,
    last_answer,
    open_conversation,
    paced,
    send,
    sidebar_names,
)
from tests.support.fake_providers import FakeProviders, Text
from tests.support.live_clients import OwnerClient, message_text

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WIDTHS = [pytest.param(1280, id="1280px"), pytest.param(375, id="375px")]
POLL_SECONDS = 10.0
TURN_MS = 60_000  # a whole turn (an edit: its post, the transcript again, the answer) on a loaded machine
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

    # Reached from the composer with Shift+Tab, like any other part of the page: the focus
    # lands on the last answer's actions, and the keys scroll the transcript around them.
    page.get_by_role("textbox", name="Message").focus()
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Regenerate answer")).to_be_focused()
    assert focus_in_transcript(page)

    assert scroll_with(page, "Home") == 0
    one_page = scroll_with(page, "PageDown")
    two_pages = scroll_with(page, "PageDown")
    back_one = scroll_with(page, "PageUp")
    end = scroll_with(page, "End")
    assert 0 < one_page < two_pages < end
    assert back_one == pytest.approx(one_page, abs=2)
    assert page.evaluate(BOTTOM)
    assert focus_in_transcript(page)
    expect(transcript).to_be_visible()


def focus_in_transcript(page: Page) -> bool:
    return bool(page.evaluate("document.getElementById('transcript').contains(document.activeElement)"))


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


def tab_to(page: Page, selector: str, *, backwards: bool = False, presses: int = 60) -> None:
    """Press Tab (or Shift+Tab) until the element matching `selector` has the focus."""
    for _ in range(presses):
        if page.evaluate("(s) => document.activeElement?.matches(s) === true", selector):
            return
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
    raise AssertionError(f"{selector} never got the focus")


@pytest.mark.parametrize("look", [LOOKS[0], LOOKS[3]])
def test_the_daily_features_work_by_keyboard_alone(
    chat_page: Page,
    context: BrowserContext,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    look: tuple[int, str],
    tmp_path: Path,
) -> None:
    page = chat_page
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    apply_look(page, look)
    narrow = look[0] < 760
    answer = "Use this:\n\n```js\nconst x = 1;\n```\n\n| a | b |\n| - | - |\n| 1 | 2 |"
    fake_providers.script([Text(answer)], [Text("Edited answer.")])
    live_owner.create_conversation("Earlier")
    page.goto("/")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")

    # A new chat, a question, an answer: all from the keyboard.
    page.keyboard.press("Control+Shift+O")
    composer = page.get_by_role("textbox", name="Message")
    expect(composer).to_be_focused()
    page.keyboard.type("Show me code.")
    page.keyboard.press("Enter")
    expect(last_answer(page).locator(".code-block .code-lang")).to_have_text("js", timeout=TURN_MS)
    expect(page.locator("#stop")).to_be_hidden()

    # Back from the composer: the answer's actions, then its code block's Copy.
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Regenerate answer")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Copy answer as Markdown")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Copy answer as Markdown")).to_have_text("Copied")
    assert clipboard(page) == answer
    page.keyboard.press("Shift+Tab")
    expect(page.get_by_role("button", name="Copy js code")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Copy js code")).to_have_text("Copied")
    assert clipboard(page) == "const x = 1;"
    tab_to(page, "button.msg-action.edit", backwards=True)
    page.keyboard.press("Enter")
    editor = page.get_by_role("textbox", name="Edit message")
    expect(editor).to_be_focused()
    page.keyboard.press("Escape")  # closes the editor, and nothing else
    expect(editor).to_have_count(0)
    page.keyboard.press("Enter")
    expect(editor).to_be_focused()
    page.keyboard.press("End")
    page.keyboard.type(" Shorter.")
    page.keyboard.press("Enter")
    expect(last_answer(page)).to_have_text("Edited answer.", timeout=TURN_MS)
    # The edit is a second version of the message, not a second message.
    expect(page.locator("#transcript .msg.user")).to_have_text(["Show me code. Shorter."])
    expect(page.get_by_role("group", name="Versions of this message")).to_contain_text("2/2")
    expect(page.locator("#stop")).to_be_hidden()

    # The header: export as Markdown, then another model.
    tab_to(page, "#export summary")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Markdown (.md)")).to_be_focused()
    with page.expect_download() as info:
        page.keyboard.press("Enter")
    path = tmp_path / "export.md"
    info.value.save_as(path)
    assert "Show me code. Shorter." in path.read_text()
    tab_to(page, "#model-switch", backwards=True)
    before = live_owner.api("GET", "/api/settings/model/").json()["configuration"]
    page.keyboard.press("ArrowDown")
    page.wait_for_function("() => !document.getElementById('model-switch').disabled")
    after = live_owner.api("GET", "/api/settings/model/").json()["configuration"]
    assert after != before

    # Search, and open what it found.
    if narrow:
        tab_to(page, "#sidebar-toggle", backwards=True)
        page.keyboard.press("Enter")
    tab_to(page, "#search", backwards=True)
    page.keyboard.type("Shorter")
    first = page.get_by_role("list", name="Search results").locator("a").first
    expect(first).to_be_visible()
    page.keyboard.press("ArrowDown")
    expect(first).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(page.get_by_role("searchbox", name="Search conversations")).to_be_focused()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator("#transcript article.turn.linked")).to_have_count(1)
    expect(page.locator("#transcript article.turn.linked .msg.user")).to_have_text("Show me code. Shorter.")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_first_tab_stop_skips_to_the_message_box(chat_page: Page, width: int) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    page.goto("/")
    expect(page.locator("#composer-input")).to_be_visible()
    expect(page.locator("#composer-input")).to_be_focused()  # the page's start is over: it focuses the box last
    # From the top of the page, as a keyboard user starting over (the body focused).
    page.evaluate("document.body.tabIndex = -1; document.body.focus(); document.body.removeAttribute('tabindex')")

    page.keyboard.press("Tab")
    skip = page.locator("#skip-to-composer")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()  # shown once it has the focus
    page.keyboard.press("Enter")

    expect(page.locator("#composer-input")).to_be_focused()
    page.keyboard.type("Straight here")
    expect(page.locator("#composer-input")).to_have_value("Straight here")


@pytest.mark.parametrize("width", WIDTHS)
def test_question_mark_lists_the_shortcuts_and_escape_closes_the_list(chat_page: Page, width: int) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    page.goto("/")
    expect(page.locator("#composer-input")).to_be_focused()  # the page's start is over: it focuses the box last
    page.locator("#transcript").focus()

    page.keyboard.press("?")
    dialog = page.locator("#shortcuts")
    expect(dialog).to_be_visible()
    expect(dialog.locator("dt")).to_have_count(6)
    expect(dialog).to_contain_text("New chat")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    page.locator("#composer-input").focus()
    page.keyboard.type("Why? Because.")
    expect(dialog).to_be_hidden()  # a "?" typed into the message stays in the message
    expect(page.locator("#composer-input")).to_have_value("Why? Because.")

    page.locator("#transcript").focus()
    page.keyboard.press("/")
    expect(page.locator("#search")).to_be_focused()


def test_what_the_owner_does_while_the_list_loads_stands(chat_page: Page, live_owner: OwnerClient) -> None:
    """A slow conversation list must not take back a new chat or the focus once it arrives."""
    page = chat_page
    live_owner.create_conversation("Earlier")
    held: list[Route] = []

    def hold_the_first(route: Route) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route("**/api/conversations/", hold_the_first)
    page.goto("/")  # waits for the load event; the list is asked for by then or soon after
    deadline = time.monotonic() + POLL_SECONDS
    while not held:
        assert time.monotonic() < deadline, "the page never asked for its conversations"
        page.wait_for_timeout(50)

    page.keyboard.press("Control+Shift+O")  # New chat, before the list has come
    page.keyboard.type("Draft")
    page.locator("#transcript").focus()
    held[0].continue_()

    expect(sidebar_names(page)).to_have_text(["Earlier"])
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(page.locator("#transcript")).to_be_focused()
    expect(page.locator("#conversation-list [aria-current]")).to_have_count(0)  # still the new chat
    expect(page.locator("#composer-input")).to_have_value("Draft")
    assert page.url.endswith("/")
