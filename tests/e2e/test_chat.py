"""The chat page in real Chromium against the live stack: conversations, streaming, stopping,
reconnecting, errors, tool activity and the narrow layout.

Every wait is a poll with a deadline (Playwright's `expect`); the loopback provider is
scripted to write slowly where a test must see an answer while it is still being written.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Page, expect

from conversations.services import conversation_delete
from tests.e2e.chat_support import (
    UNDO_MS,
    answers,
    conversations,
    engine_call_id_of,
    forgive,
    last_answer,
    open_conversation,
    paced,
    send,
    sidebar_names,
    tool_card,
    undo_runs_out,
    watch_transcript_for,
)
from tests.e2e.conftest import PageErrors, screenshot
from tests.support.fake_providers import Call, FakeProviders, HttpError, Text
from tests.support.live import LiveStack
from tests.support.live_clients import OwnerClient, message_text
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME
from tools.models import ToolActivity

# Fixtures shared with the other chat test modules.

TURN_MS = 60_000

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_it_creates_renames_and_deletes_conversations_as_the_api_sees_them(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    older = live_owner.create_conversation("Older one")
    page.clock.install()
    page.goto("/")
    expect(sidebar_names(page)).to_have_text(["Older one"])

    page.get_by_role("button", name="New chat").click()
    expect(page).to_have_url(re.compile(r"/$"))
    assert [c["id"] for c in conversations(live_owner)] == [older]
    send(page, "Trip to Lisbon")
    expect(sidebar_names(page)).to_have_text(["Trip to Lisbon", "Older one"])
    [created, listed_older] = conversations(live_owner)
    assert (created["name"], listed_older["id"]) == ("Trip to Lisbon", older)
    expect(page).to_have_url(re.compile(rf"\?c={created['id']}$"))

    page.get_by_role("button", name="Rename Trip to Lisbon").click()
    field = page.get_by_role("textbox", name="Conversation name")
    field.fill("Lisbon in May")
    field.press("Enter")
    expect(sidebar_names(page).first).to_have_text("Lisbon in May")
    expect(page.locator("#conversation-title")).to_have_text("Lisbon in May")
    assert [c["name"] for c in conversations(live_owner)] == ["Lisbon in May", "Older one"]

    page.get_by_role("button", name="Delete Lisbon in May").click()
    page.get_by_role("button", name="Cancel").click()
    expect(sidebar_names(page)).to_have_count(2)
    page.get_by_role("button", name="Delete Lisbon in May").click()
    page.locator(".confirm-delete").click()
    expect(sidebar_names(page)).to_have_text(["Older one"])
    expect(page).to_have_url(re.compile(rf"\?c={older}$"))
    expect(page.locator("#notice")).to_be_hidden()
    expect(page.locator(".undo-bar")).to_contain_text("Deleted “Lisbon in May”.")
    undo_runs_out(page, live_owner, [older])
    expect(page.locator(".undo-bar")).to_have_count(0)


def test_it_streams_an_answer_into_the_page_while_the_model_writes_it(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    chunks = ["Here is **the plan**:\n\n", "1. Pack\n", "2. Travel\n\n"] + [f"Step {i} is done. " for i in range(30)]
    fake_providers.script(paced(chunks, 0.05))
    conversation_id = live_owner.create_conversation("Streaming")
    open_conversation(page, conversation_id)

    send(page, "Make me a plan.")

    expect(page.locator("#transcript .msg.user")).to_have_text(["Make me a plan."])
    answer = last_answer(page)
    expect(answer).to_contain_text("Step 3 is done.")
    # Seen while the model was still writing: the last sentence had not arrived yet.
    assert "Step 29 is done." not in answer.inner_text()
    expect(page.locator("#stop")).to_be_visible()
    expect(answer).to_contain_text("Step 29 is done.")
    expect(page.locator("#stop")).to_be_hidden()
    expect(answer.locator("strong")).to_have_text("the plan")
    expect(answer.locator("ol > li")).to_have_text(["Pack", "Travel"])
    expect(answers(page)).to_have_count(1)
    screenshot(page, "chat")
    transcript = live_owner.messages(conversation_id)
    assert [(m["role"], message_text(m)) for m in transcript["messages"]] == [
        ("user", "Make me a plan."),
        ("assistant", "".join(chunks)),
    ]

    page.reload()
    expect(last_answer(page)).to_contain_text("Step 29 is done.")
    expect(page.locator("#transcript .msg.user")).to_have_text(["Make me a plan."])
    expect(answers(page)).to_have_count(1)
    assert urlparse(page.url).query == f"c={conversation_id}"


def test_it_stops_an_answer_mid_stream_and_keeps_what_was_written(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    words = [f"word{i:03d} " for i in range(200)]  # 10 s if nobody stopped it
    fake_providers.script(paced(words, 0.05))
    conversation_id = live_owner.create_conversation("Stopping")
    open_conversation(page, conversation_id)

    send(page, "Say two hundred words.")
    expect(last_answer(page)).to_contain_text("word005")
    page.get_by_role("button", name="Stop", exact=True).click()

    expect(page.locator(".turn-note.cancelled")).to_have_text("Stopped.")
    expect(page.locator("#stop")).to_be_hidden()
    shown = last_answer(page).inner_text().strip()
    [_, assistant] = live_owner.messages(conversation_id)["messages"]
    stored = message_text(assistant)
    assert shown == stored.strip()
    assert "".join(words).startswith(stored)
    assert "word199" not in stored
    page.reload()
    expect(last_answer(page)).to_have_text(stored.strip())
    expect(page.locator(".turn-note.cancelled")).to_have_text("Stopped.")
    expect(page.locator("#stop")).to_be_hidden()


def test_it_finishes_an_answer_exactly_once_after_the_server_restarts_mid_stream(
    chat_page: Page,
    page_errors: PageErrors,
    live_stack: LiveStack,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
) -> None:
    page = chat_page
    parts = [f"Part {i:02d} of the tale. " for i in range(60)]  # about 6 s
    fake_providers.script(paced(parts, 0.1))
    conversation_id = live_owner.create_conversation("Restart")
    open_conversation(page, conversation_id)

    send(page, "Tell me the tale in parts.")
    expect(last_answer(page)).to_contain_text("Part 03")
    live_stack.restart("web")

    expect(last_answer(page)).to_contain_text("Part 59 of the tale.", timeout=TURN_MS)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator("#stop")).to_be_hidden()
    text = last_answer(page).inner_text().strip()
    assert text == "".join(parts).strip()
    expect(answers(page)).to_have_count(1)
    expect(page.locator("#transcript .msg.user")).to_have_count(1)
    # The stopped server refused the page's reconnection attempts until it was back.
    forgive(page_errors, "ERR_CONNECTION_REFUSED", "ERR_EMPTY_RESPONSE", "ERR_CONNECTION_RESET")


def test_it_shows_a_failed_turn_with_a_link_to_settings_when_the_key_is_missing(
    chat_page: Page, live_owner: OwnerClient, fake_providers: FakeProviders
) -> None:
    page = chat_page
    conversation_id = live_owner.create_conversation("No key yet")
    open_conversation(page, conversation_id)

    send(page, "Hello?")

    note = page.locator(".turn-note.failed")
    expect(note).to_contain_text("API key in Settings")
    expect(note.get_by_role("link", name="Open Settings")).to_have_attribute("href", "/settings/")
    expect(page.locator("#stop")).to_be_hidden()
    assert not fake_providers.requests
    page.reload()
    expect(page.locator(".turn-note.failed")).to_contain_text("API key in Settings")
    expect(page.locator("#transcript .msg.user")).to_have_text(["Hello?"])


def test_it_never_shows_a_late_reply_of_the_conversation_it_left(
    chat_page: Page, live_stack: LiveStack, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    fake_providers.script(paced([f"Alpha line {i}. " for i in range(40)], 0.05))
    quiet = live_owner.create_conversation("Quiet one")
    busy = live_owner.create_conversation("Busy one")
    open_conversation(page, busy)

    send(page, "Talk for a while.")
    expect(last_answer(page)).to_contain_text("Alpha line 2.")
    page.locator(f'.conversation[data-conversation-id="{quiet}"] .conversation-link').click()
    expect(page).to_have_url(re.compile(rf"\?c={quiet}$"))
    expect(page.locator("#conversation-title")).to_have_text("Quiet one")
    watch_transcript_for(page, "Alpha")

    def finished() -> bool:
        messages = live_owner.messages(busy)["messages"]
        return len(messages) == 2 and message_text(messages[1]).endswith("Alpha line 39. ")

    live_stack.stack.wait_for(finished, timeout=TURN_MS / 1000, what="the busy answer to finish")
    expect(page.locator("#empty-state")).to_be_visible()
    assert page.evaluate("window.__seen") is False
    expect(page.locator("#transcript .msg")).to_have_count(0)

    page.go_back()
    expect(page.locator("#conversation-title")).to_have_text("Busy one")
    expect(last_answer(page)).to_contain_text("Alpha line 39.")


def test_it_drops_a_conversation_deleted_elsewhere_and_opens_another(chat_page: Page, live_owner: OwnerClient) -> None:
    page = chat_page
    kept = live_owner.create_conversation("Kept")
    doomed = live_owner.create_conversation("Doomed")
    open_conversation(page, doomed)

    assert live_owner.api("DELETE", f"/api/conversations/{doomed}/").status_code == 204

    expect(sidebar_names(page)).to_have_text(["Kept"])
    expect(page).to_have_url(re.compile(rf"\?c={kept}$"))
    expect(page.locator("#notice")).to_contain_text("no longer exists")
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")


def test_it_returns_to_sign_in_when_the_session_ends_in_another_tab(chat_page: Page, live_owner: OwnerClient) -> None:
    page = chat_page
    conversation_id = live_owner.create_conversation("Signed in")
    open_conversation(page, conversation_id)

    other = page.context.new_page()
    other.goto("/")
    other.get_by_role("button", name="Sign out").click()
    expect(other).to_have_url(re.compile(r"/login/"))

    expect(page).to_have_url(re.compile(r"/login/"))
    expect(page.locator("input[name=username]")).to_be_visible()
    other.close()
    # Signing in again from there comes back to the same conversation.
    page.fill("input[name=username]", OWNER_USERNAME)
    page.fill("input[name=password]", OWNER_PASSWORD)
    page.click("button[type=submit]")
    expect(page).to_have_url(re.compile(rf"/\?c={conversation_id}$"))
    expect(page.locator("#conversation-title")).to_have_text("Signed in")


def test_it_sends_with_enter_adds_lines_with_shift_enter_and_refuses_an_overlong_message(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    conversation_id = live_owner.create_conversation("Keyboard")
    open_conversation(page, conversation_id)
    composer = page.get_by_role("textbox", name="Message")

    composer.fill("x" * 32_001)
    composer.press("Enter")
    expect(page.locator("#composer-error")).to_contain_text("too long")
    expect(page.locator("#composer-error")).to_contain_text("32,000")
    assert live_owner.messages(conversation_id)["messages"] == []
    composer.press("Backspace")
    expect(page.locator("#composer-error")).to_be_hidden()

    composer.fill("")
    composer.press_sequentially("line one")
    composer.press("Shift+Enter")
    composer.press_sequentially("line two")
    composer.press("Enter")
    expect(page.locator("#transcript .msg.user")).to_have_text(["line one\nline two"])
    expect(last_answer(page)).to_have_text("Hello from the fake model.")
    expect(composer).to_have_value("")
    expect(composer).to_be_focused()
    [user, _] = live_owner.messages(conversation_id)["messages"]
    assert message_text(user) == "line one\nline two"


def test_it_shows_each_tool_call_as_a_card_that_opens_to_its_result(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    rich = (
        "## Weather in Lisbon\n\n"
        "The lookup failed, so here is what I know:\n\n"
        "- Summers are **warm** and dry\n- Winters are *mild*\n\n"
        "> Pack a light jacket.\n\n"
        "```python\nforecast = {'lisbon': 'sunny', 'porto': 'cloudy'}  # a long line that scrolls sideways\n```\n\n"
        "See [the IPMA site](https://www.ipma.pt/en/) for `live` data."
    )
    fake_providers.script(
        [Text("Let me look that up."), Call("toolu_weather", "lookup_weather", {"city": "Lisbon"})],
        [Text(rich)],
    )
    conversation_id = live_owner.create_conversation("Tools")
    open_conversation(page, conversation_id)

    send(page, "What is the weather in Lisbon?")

    card = tool_card(page, "toolu_weather")
    expect(card).to_have_attribute("data-status", "failed")
    expect(card.locator(".tool-label")).to_have_text("Unknown tool")
    expect(card.locator(".tool-status")).to_have_text("Failed")
    expect(card.locator(".tool-duration")).to_have_text("")  # it never ran: nothing to time
    expect(card.locator(".tool-body")).to_be_hidden()
    expect(last_answer(page).locator("h2")).to_have_text("Weather in Lisbon")
    card.locator("summary").click()
    expect(card.locator(".tool-body")).to_be_visible()
    expect(card.locator(".tool-summary")).to_contain_text("There is no tool named 'lookup_weather'")
    expect(card.locator(".tool-json").first).to_contain_text('"city": "Lisbon"')
    expect(card.locator(".tool-json").nth(1)).to_contain_text('"error": "unknown_tool"')
    expect(page.locator("#stop")).to_be_hidden()
    page.locator("#transcript").evaluate("(t) => { t.scrollTop = t.scrollHeight; }")
    screenshot(page, "chat")
    page.emulate_media(color_scheme="dark")
    screenshot(page, "chat-dark")
    page.emulate_media(color_scheme="light")

    page.reload()
    card = tool_card(page, "toolu_weather")
    expect(card).to_have_attribute("data-status", "failed")
    expect(card.locator(".tool-label")).to_have_text("Unknown tool")
    expect(answers(page)).to_have_count(1)
    expect(last_answer(page)).to_contain_text("Let me look that up.")


def test_it_fits_a_375_pixel_screen_with_the_sidebar_behind_a_toggle(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    page.set_viewport_size({"width": 375, "height": 740})
    other = live_owner.create_conversation("Another conversation")
    conversation_id = live_owner.create_conversation("Narrow screen")
    long_code = "```\n" + "x = " + "1 + " * 60 + "1\n```\n\nAnd a long link: https://example.com/" + "a" * 120
    fake_providers.script([Text(long_code)])
    open_conversation(page, conversation_id)

    sidebar = page.locator("#sidebar")
    toggle = page.get_by_role("button", name="Show conversations")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_visible()
    composer = page.get_by_role("textbox", name="Message")
    expect(composer).to_be_visible()
    send(page, "Show me a long line.")
    expect(last_answer(page).locator("pre")).to_be_visible()
    expect(page.locator("#stop")).to_be_hidden()
    box = composer.bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= 375
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    assert page.evaluate("document.getElementById('transcript').scrollWidth") <= 375
    screenshot(page, "chat-375")

    toggle.click()
    expect(sidebar).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    page.locator(f'.conversation[data-conversation-id="{other}"] .conversation-link').click()
    expect(sidebar).to_be_hidden()
    expect(page.locator("#conversation-title")).to_have_text("Another conversation")
    toggle.click()
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(toggle).to_be_focused()


def test_it_learns_from_the_close_code_that_a_conversation_went_while_the_server_was_down(
    chat_page: Page, page_errors: PageErrors, live_stack: LiveStack, live_owner: OwnerClient
) -> None:
    page = chat_page
    kept = live_owner.create_conversation("Kept")
    doomed = live_owner.create_conversation("Doomed")
    open_conversation(page, doomed)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    list_reads: list[str] = []
    page.on("request", lambda r: list_reads.append(r.url) if urlparse(r.url).path == "/api/conversations/" else None)

    since = live_stack.log_size("web")
    live_stack.stack.stop(only="web")
    expect(page.locator("#connection")).not_to_have_attribute("data-state", "live")
    conversation_delete(conversation_id=uuid.UUID(doomed))
    live_stack.stack.start(only="web")
    live_stack.wait_ready("web", since=since)

    # The reconnection is refused with 4004: the page drops the conversation at once,
    # without asking the list first.
    expect(page.locator("#notice")).to_contain_text("no longer exists", timeout=TURN_MS)
    expect(page).to_have_url(re.compile(rf"\?c={kept}$"))
    expect(sidebar_names(page)).to_have_text(["Kept"])
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    assert list_reads == []
    forgive(page_errors, "ERR_CONNECTION_REFUSED", "ERR_EMPTY_RESPONSE", "ERR_CONNECTION_RESET")


@pytest.mark.parametrize("width", [1280, 375])
def test_clear_history_asks_in_the_page_offers_undo_then_empties_every_tab_and_keeps_the_name(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    fake_providers.script([Text("Pack the blue suitcase.")])
    conversation_id = live_owner.create_conversation("Holiday plans")
    page.clock.install()
    open_conversation(page, conversation_id)
    send(page, "What should I pack?")
    expect(last_answer(page)).to_have_text("Pack the blue suitcase.")
    other = page.context.new_page()
    open_conversation(other, conversation_id)
    expect(last_answer(other)).to_have_text("Pack the blue suitcase.")
    clears: list[str] = []
    page.on("request", lambda request: clears.append(request.url) if request.url.endswith("/clear/") else None)
    asked = page.get_by_role("alertdialog", name=re.compile("^Clear the history of “Holiday plans”?"))
    bar = page.locator(".undo-bar")

    def clear_history() -> None:
        page.locator("#export summary").click()
        page.get_by_role("button", name="Clear history…").click()
        expect(asked).to_be_visible()

    # Asked in the page, its safe answer focused: Esc declines, and nothing changed.
    clear_history()
    expect(asked.get_by_role("button", name="Cancel")).to_be_focused()
    screenshot(page, f"chat-clear-history-asked-{width}")
    page.keyboard.press("Escape")
    expect(asked).to_have_count(0)
    expect(last_answer(page)).to_have_text("Pack the blue suitcase.")

    # Confirmed: the history goes at once, behind an Undo; Undo brings it back and nothing is sent.
    clear_history()
    asked.get_by_role("button", name="Clear history", exact=True).click()
    expect(page.locator("#empty-state")).to_be_visible()
    expect(last_answer(page)).to_be_hidden()
    expect(bar).to_contain_text("Cleared the history of “Holiday plans”.")
    screenshot(page, f"chat-clear-history-undo-{width}")
    bar.get_by_role("button", name="Undo").click()
    expect(last_answer(page)).to_have_text("Pack the blue suitcase.")
    expect(page.locator("#empty-state")).to_be_hidden()
    page.clock.fast_forward(UNDO_MS + 1_000)
    page.wait_for_timeout(500)  # time for a request the page would (wrongly) send now
    assert clears == []
    assert len(live_owner.messages(conversation_id)["messages"]) == 2

    # Confirmed again, and the Undo's time runs out: the server clears it, for every tab.
    clear_history()
    asked.get_by_role("button", name="Clear history", exact=True).click()
    expect(bar).to_be_visible()
    page.clock.fast_forward(UNDO_MS)

    for tab in (page, other):
        expect(tab.locator("#transcript .msg")).to_have_count(0)
        expect(tab.locator("#empty-state")).to_be_visible()
        expect(tab.locator("#conversation-title")).to_have_text("Holiday plans")
    expect(bar).to_have_count(0)
    assert live_owner.messages(conversation_id)["messages"] == []
    assert len(clears) == 1
    screenshot(page, f"chat-cleared-{width}")
    page.reload()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    expect(page.locator("#transcript .msg")).to_have_count(0)
    other.close()


@pytest.mark.parametrize("width", [1280, 375])
def test_a_card_says_when_its_call_was_interrupted_and_that_it_ran_again(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    fake_providers.script([Call("toolu_lost", "lookup_weather", {"city": "Faro"})], [Text("Done.")])
    conversation_id = live_owner.create_conversation("Crash")
    open_conversation(page, conversation_id)
    send(page, "Weather in Faro?")
    card = tool_card(page, "toolu_lost")
    expect(card).to_have_attribute("data-status", "failed")
    expect(card.locator(".tool-interrupted")).to_be_hidden()  # never interrupted: nothing said
    # Its worker died mid-call at 09:41 UTC; recovery ran the call again (as the engine records it).
    at = datetime(2026, 12, 1, 9, 41, tzinfo=UTC)
    activity = ToolActivity.objects.filter(tool_call_id=engine_call_id_of(page, "toolu_lost"))
    assert activity.update(interrupted_at=at) == 1

    page.reload()

    note = tool_card(page, "toolu_lost").locator(".tool-interrupted")
    expect(note).to_be_visible()  # folded: said without opening the card
    local = page.evaluate(
        "(iso) => new Date(iso).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'})", at.isoformat()
    )
    expect(note).to_have_text(f"Interrupted at {local}, run again")
    assert (note.locator("time").get_attribute("datetime") or "").startswith("2026-12-01T09:41:00")
    screenshot(page, f"chat-card-interrupted-{width}")
    assert activity.update(status="interrupted") == 1
    page.reload()
    expect(note).to_have_text(f"Interrupted at {local}")


@pytest.mark.parametrize("width", [1280, 375])
def test_a_provider_refusal_says_what_happened_and_what_to_do(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    fake_providers.script([HttpError(403, {"type": "error", "error": {"type": "permission_error", "message": "x"}})])
    conversation_id = live_owner.create_conversation("Refused")
    open_conversation(page, conversation_id)

    send(page, "Hello?")

    note = page.locator(".turn-note.failed")
    expect(note).to_contain_text("Anthropic refused this key access (HTTP 403)")
    expect(note).to_contain_text("Check the key's permissions in your account.")
    expect(note).not_to_contain_text("connection")  # a connection was made: it is not said to be lost
    screenshot(page, f"chat-provider-403-{width}")
