"""Message actions and code blocks on the chat page in real Chromium, at 1280 and 375 pixels,
light and dark: copy a message or a code block, Regenerate, Edit and Retry as versions (two
tabs and a reload agree), times on hover, and syntax highlighting that arrives only once a
block's fence closes.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, Route, expect

from tests.e2e.chat_support import (
    LOOKS,
    answers,
    apply_look,
    assert_scheme,
    clipboard,
    last_answer,
    no_sideways_scroll,
    open_conversation,
    paced,
    send,
)
from tests.e2e.conftest import screenshot
from tests.support.fake_providers import FakeProviders, Text
from tests.support.live_clients import OwnerClient, message_text

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

CODE = ["def add(a, b):\n", "    return a + b\n", "\n", "print(add(2, 3))  # 5\n"]
MORE = [f"print(add({i}, {i}))\n" for i in range(6)]
HIGHLIGHTER_LOADED = "performance.getEntriesByType('resource').filter((e) => e.name.includes('/highlight/')).length"
TABLE = "| Tool | Use |\n| --- | --- |\n| `grep` | " + "find text in very long file names " * 4 + "|\n"


@pytest.fixture
def clipboard_context(context: BrowserContext) -> BrowserContext:
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    return context


def user_messages(page: Page) -> Locator:
    """The shown messages of the owner. Asserted with `expect`, which waits: right after a
    switch of versions a turn may not be laid out yet (`.turn` has content-visibility: auto),
    and a one-off read of its inner text then finds it empty."""
    return page.locator("#transcript .msg.user")


@pytest.mark.parametrize("look", LOOKS)
def test_it_labels_copies_and_highlights_a_code_block_once_its_fence_closes(
    chat_page: Page,
    clipboard_context: BrowserContext,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    look: tuple[int, str],
) -> None:
    page = chat_page
    apply_look(page, look)
    # The closing fence comes a while after the code (more lines keep arriving, slowly, so
    # that no stall is suspected): long enough to see the block open.
    chunks = ["Here it is:\n\n", TABLE, "\n```python\n", *CODE]
    fake_providers.script([*paced(chunks, 0.05), *paced(MORE, 0.5), Text("```\n\nDone.")])
    conversation_id = live_owner.create_conversation("Code")
    open_conversation(page, conversation_id)
    assert_scheme(page, look)
    assert page.evaluate(HIGHLIGHTER_LOADED) == 0  # loaded only once a code block shows

    send(page, "Show me an add function.")

    block = last_answer(page).locator(".code-block")
    expect(block.locator(".code-lang")).to_have_text("python")
    expect(block.locator("code")).to_contain_text("print(add(2, 3))")
    # Still open: shown as plain text, not highlighted yet.
    expect(block.locator("pre")).to_have_attribute("data-open", "")
    assert block.locator("code span").count() == 0
    expect(last_answer(page)).to_contain_text("Done.")
    expect(block.locator("pre")).not_to_have_attribute("data-open", "")
    keyword = block.locator("code .hljs-keyword").first
    expect(keyword).to_have_text("def")
    colors = keyword.evaluate("(k) => [getComputedStyle(k).color, getComputedStyle(k.closest('pre')).color]")
    assert colors[0] != colors[1]  # the theme of the scheme applies
    expect(block.locator("code")).to_have_text("".join(CODE + MORE).rstrip("\n"))
    table = last_answer(page).locator("table")
    expect(table.locator("th")).to_have_text(["Tool", "Use"])
    expect(table.locator("td code")).to_have_text("grep")
    no_sideways_scroll(page)
    screenshot(page, f"chat-code-{look[1]}-{look[0]}")

    block.get_by_role("button", name="Copy python code").click()
    expect(block.get_by_role("button", name="Copy python code")).to_have_text("Copied")
    assert clipboard(page) == "".join(CODE + MORE).rstrip("\n")

    page.reload()
    expect(last_answer(page).locator("code .hljs-keyword").first).to_have_text("def")


def version_count(page: Page, what: str) -> Locator:
    """The `2/3` of the last turn's message or answer versions."""
    return (
        page.locator("#transcript article.turn")
        .last.get_by_role("group", name=f"Versions of this {what}")
        .locator(".version-count")
    )


def stored(live_owner: OwnerClient, conversation_id: str) -> list[tuple[str, str]]:
    return [(m["role"], message_text(m)) for m in live_owner.messages(conversation_id)["messages"]]


@pytest.mark.parametrize("look", LOOKS)
def test_regenerate_and_edit_add_versions_instead_of_turns(
    chat_page: Page,
    clipboard_context: BrowserContext,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    look: tuple[int, str],
) -> None:
    page = chat_page
    apply_look(page, look)
    fake_providers.script(
        [Text("Honey **never** spoils.")],
        [Text("Octopuses have three hearts.")],
        [Text("Bananas are berries.")],
        [Text("You asked about fruit.")],
    )
    conversation_id = live_owner.create_conversation("Facts")
    open_conversation(page, conversation_id)

    send(page, "Tell me a fact.")
    expect(last_answer(page)).to_have_text("Honey never spoils.")
    expect(page.locator("#stop")).to_be_hidden()
    first_turn = page.locator("#transcript article.turn").first
    first_turn.locator(".msg.assistant").hover()
    copy = first_turn.get_by_role("button", name="Copy answer as Markdown")
    expect(copy).to_be_visible()
    copy.click()
    expect(copy).to_have_text("Copied")
    assert clipboard(page) == "Honey **never** spoils."
    first_turn.locator(".msg.user").hover()
    first_turn.get_by_role("button", name="Copy message").click()
    assert clipboard(page) == "Tell me a fact."

    # Times show on hover: the clock in view, the full date in its title.
    time = first_turn.locator(".user-actions time")
    page.get_by_role("textbox", name="Message").focus()  # away from the Copy just clicked
    page.get_by_role("textbox", name="Message").hover()
    expect(first_turn.locator(".user-actions")).to_have_css("opacity", "0")
    first_turn.locator(".msg.user").hover()
    expect(first_turn.locator(".user-actions")).to_have_css("opacity", "1")
    expect(time).to_have_text(re.compile(r"\d{1,2}:\d{2}"))
    assert time.get_attribute("datetime")
    assert time.get_attribute("title")

    # Regenerate: a second version of the answer, not a second question and answer.
    page.get_by_role("button", name="Regenerate answer").click()
    expect(last_answer(page)).to_have_text("Octopuses have three hearts.")
    expect(page.locator("#stop")).to_be_hidden()
    expect(answers(page)).to_have_count(1)
    expect(user_messages(page)).to_have_text(["Tell me a fact."])
    expect(version_count(page, "answer")).to_have_text("2/2")
    page.get_by_role("button", name="Previous version of this answer").click()
    expect(last_answer(page)).to_have_text("Honey never spoils.")
    expect(version_count(page, "answer")).to_have_text("1/2")
    expect(page.get_by_role("button", name="Previous version of this answer")).to_be_disabled()

    # Edit: a second version of the message, with its own answer.
    page.locator("#transcript article.turn").last.locator(".msg.user").hover()
    page.get_by_role("button", name="Edit and send as a new message").locator("visible=true").click()
    editor = page.get_by_role("textbox", name="Edit message")
    expect(editor).to_be_focused()
    expect(editor).to_have_value("Tell me a fact.")
    editor.fill("Tell me a fact about fruit.")
    editor.press("Enter")

    expect(last_answer(page)).to_have_text("Bananas are berries.")
    expect(page.locator("#stop")).to_be_hidden()
    expect(user_messages(page)).to_have_text(["Tell me a fact about fruit."])
    expect(version_count(page, "message")).to_have_text("2/2")
    no_sideways_scroll(page)
    screenshot(page, f"chat-versions-{look[1]}-{look[0]}")
    assert stored(live_owner, conversation_id) == [
        ("user", "Tell me a fact about fruit."),
        ("assistant", "Bananas are berries."),
    ]

    # The next message follows the shown branch, and the model sees that branch alone.
    send(page, "What did I ask?")
    expect(last_answer(page)).to_have_text("You asked about fruit.")
    body = fake_providers.requests[-1].body
    said = [c["text"] for m in body["messages"] for c in m["content"] if c["type"] == "text"]
    assert said == ["Tell me a fact about fruit.", "Bananas are berries.", "What did I ask?"]

    # Back to the first message: its newest answer, and nothing after it.
    page.get_by_role("button", name="Previous version of this message").click()
    expect(page.locator("#transcript .msg.user")).to_have_count(1)
    expect(user_messages(page)).to_have_text(["Tell me a fact."])
    expect(last_answer(page)).to_have_text("Octopuses have three hearts.")
    expect(version_count(page, "message")).to_have_text("1/2")
    expect(version_count(page, "answer")).to_have_text("2/2")


@pytest.mark.parametrize("look", [LOOKS[0], LOOKS[3]])
def test_versions_are_kept_on_the_server_for_every_tab_and_a_reload(
    chat_page: Page,
    context: BrowserContext,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    look: tuple[int, str],
) -> None:
    fake_providers.script([Text("Blue.")], [Text("Green.")])
    conversation_id = live_owner.create_conversation("Colours")
    first, second = chat_page, context.new_page()
    for page in (first, second):
        apply_look(page, look)
        open_conversation(page, conversation_id)

    send(first, "Name a colour.")
    expect(last_answer(second)).to_have_text("Blue.")
    expect(second.locator("#stop")).to_be_hidden()
    second.get_by_role("button", name="Regenerate answer").click()

    for page in (first, second):
        expect(last_answer(page)).to_have_text("Green.")
        expect(version_count(page, "answer")).to_have_text("2/2")
        expect(page.locator("#stop")).to_be_hidden()
    first.get_by_role("button", name="Previous version of this answer").click()
    for page in (first, second):
        expect(last_answer(page)).to_have_text("Blue.")
        expect(version_count(page, "answer")).to_have_text("1/2")
        expect(answers(page)).to_have_count(1)

    second.reload()
    expect(last_answer(second)).to_have_text("Blue.")
    expect(version_count(second, "answer")).to_have_text("1/2")
    no_sideways_scroll(second)
    second.close()


@pytest.mark.parametrize("look", [LOOKS[0], LOOKS[3]])
def test_retry_replaces_a_failed_answer_and_keeps_a_stopped_one_as_a_version(
    chat_page: Page, live_owner: OwnerClient, fake_providers: FakeProviders, look: tuple[int, str]
) -> None:
    page = chat_page
    apply_look(page, look)
    conversation_id = live_owner.create_conversation("Retry")
    open_conversation(page, conversation_id)

    send(page, "Hello?")
    expect(page.locator(".turn-note.failed")).to_contain_text("API key in Settings")
    retry = page.get_by_role("button", name="Retry this message")
    expect(retry).to_be_visible()
    expect(page.get_by_role("button", name="Regenerate answer")).to_have_count(0)

    live_owner.set_provider_key("anthropic", "sk-ant-api03-" + "r" * 40)
    fake_providers.script(paced([f"word{i:03d} " for i in range(200)], 0.05), [Text("Hello at last.")])
    retry.click()
    expect(last_answer(page)).to_contain_text("word003")
    # The failure is gone: the retry replaced it.
    expect(page.locator(".turn-note.failed")).to_have_count(0)
    page.get_by_role("button", name="Stop", exact=True).click()
    expect(page.locator(".turn-note.cancelled")).to_have_text("Stopped.")
    page.get_by_role("button", name="Retry this message").locator("visible=true").click()

    expect(last_answer(page)).to_have_text("Hello at last.")
    expect(page.locator("#stop")).to_be_hidden()
    expect(user_messages(page)).to_have_text(["Hello?"])
    expect(page.locator(".turn-note")).to_have_count(0)
    expect(version_count(page, "answer")).to_have_text("2/2")
    page.get_by_role("button", name="Previous version of this answer").click()
    expect(page.locator(".turn-note.cancelled")).to_have_text("Stopped.")
    expect(last_answer(page)).to_contain_text("word000")
    assert stored(live_owner, conversation_id)[0] == ("user", "Hello?")


def test_an_edit_hides_a_message_that_was_stored_before_its_transcript_loaded(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    """A message sent before the page had its socket goes over HTTP; when the transcript the
    page loads already holds it, its acknowledgement comes after. An edit must then hide it
    like any other version, not bring it back below the new one."""
    page = chat_page
    fake_providers.script([Text("Honey never spoils.")], [Text("Bananas are berries.")])
    conversation_id = live_owner.create_conversation("Facts")
    loads: list[Route] = []
    sends: list[Route] = []

    def hold_the_first_load_and_send(route: Route) -> None:
        held = loads if route.request.method == "GET" else sends
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route(f"**/api/conversations/{conversation_id}/messages/", hold_the_first_load_and_send)
    page.goto(f"/?c={conversation_id}")
    while not loads:  # the transcript is on its way: no socket before it arrives
        page.wait_for_timeout(20)
    send(page, "Tell me a fact.")
    while not sends:
        page.wait_for_timeout(20)
    stored_response = sends[0].fetch()  # the message is stored, its answer on its way ...
    assert stored_response.status == 202
    loads[0].continue_()  # ... and the transcript the page loads holds it: before its ack
    expect(last_answer(page)).to_have_text("Honey never spoils.")
    # Acknowledged twice: on the socket (a message not acknowledged yet is sent again once
    # it is live, and its request_id returns the same turn), then by this late answer.
    sends[0].fulfill(response=stored_response)
    expect(page.locator("#stop")).to_be_hidden()
    expect(user_messages(page)).to_have_text(["Tell me a fact."])

    page.locator("#transcript .msg.user").hover()
    page.get_by_role("button", name="Edit and send as a new message").locator("visible=true").click()
    editor = page.get_by_role("textbox", name="Edit message")
    editor.fill("Tell me a fact about fruit.")
    editor.press("Enter")

    expect(last_answer(page)).to_have_text("Bananas are berries.")
    expect(user_messages(page)).to_have_text(["Tell me a fact about fruit."])
    expect(answers(page)).to_have_count(1)
    expect(version_count(page, "message")).to_have_text("2/2")
