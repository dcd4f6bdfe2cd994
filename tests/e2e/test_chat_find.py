"""Finding and keeping conversations from the chat page in real Chromium, at 1280 and 375
pixels, light and dark: the sidebar's search (titles and message text, with snippets) and
the export of a conversation as a Markdown or JSON download.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.chat_support import (
    LOOKS,
    apply_look,
    assert_scheme,
    last_answer,
    open_conversation,
    open_sidebar,
    send,
    sidebar_names,
)
from tests.e2e.conftest import screenshot
from tests.support.fake_providers import FakeProviders, Text
from tests.support.live_clients import OwnerClient

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def answered(page: Page, live_owner: OwnerClient, name: str, question: str) -> str:
    """A conversation with one answered question, made through the page."""
    conversation_id = live_owner.create_conversation(name)
    open_conversation(page, conversation_id)
    send(page, question)
    expect(page.locator("#stop")).to_be_hidden()
    expect(last_answer(page)).not_to_be_empty()
    return conversation_id


@pytest.mark.parametrize("look", LOOKS)
def test_it_searches_titles_and_message_text_and_opens_the_match(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, look: tuple[int, str]
) -> None:
    page = chat_page
    apply_look(page, look)
    fake_providers.script([Text("Cherry tomatoes tolerate partial shade well.")], [Text("Measure twice.")])
    garden = answered(page, live_owner, "Garden", "Which tomatoes grow in shade?")
    kitchen = answered(page, live_owner, "Kitchen renovation", "Where do I start?")
    assert_scheme(page, look)

    open_sidebar(page, look)
    search = page.get_by_role("searchbox", name="Search conversations")
    search.fill("tomato")
    results = page.get_by_role("list", name="Search results").locator("a")
    expect(results.first).to_be_visible()
    expect(sidebar_names(page).first).to_be_hidden()  # the results take the list's place
    # One row for the conversation (the question and the answer both match): its best match,
    # the matched word marked, and how many more of its messages matched.
    expect(page.locator("#search-status")).to_have_text("1 conversation")
    expect(results.locator(".result-name")).to_have_text(["Garden"])
    expect(results.locator(".result-snippet mark")).to_have_text([re.compile("^tomatoes$", re.IGNORECASE)])
    expect(results.locator(".result-more")).to_have_text(["and 1 more"])
    screenshot(page, f"chat-search-{look[1]}-{look[0]}")
    results.first.click()

    view = page.locator(f'#transcript .transcript-view[data-conversation-id="{garden}"]')
    expect(view).to_be_attached()
    expect(view.locator("article.turn.linked")).to_have_count(1)
    found = view.locator(".msg.found")
    expect(found).to_have_count(1)  # the message that matched is marked
    expect(found).to_contain_text("tomatoes")
    open_sidebar(page, look)
    search.fill("renovating kitchens")  # stemmed, like memory search
    expect(results.locator(".result-name")).to_have_text(["Kitchen renovation"])
    results.first.click()
    expect(page.locator(f'#transcript .transcript-view[data-conversation-id="{kitchen}"]')).to_be_attached()

    open_sidebar(page, look)
    search.fill("x" * 1001)
    expect(page.locator("#search-status")).to_have_text("A search is at most 1,000 characters.")
    search.fill("q" * 1000)
    expect(page.locator("#search-status")).to_have_text("Nothing found.")
    search.press("Escape")
    expect(search).to_have_value("")
    expect(sidebar_names(page)).to_have_text(["Kitchen renovation", "Garden"])


@pytest.mark.parametrize("look", LOOKS)
def test_it_downloads_the_conversation_as_markdown_and_json(
    chat_page: Page,
    live_owner: OwnerClient,
    anthropic_key: str,
    fake_providers: FakeProviders,
    look: tuple[int, str],
    tmp_path: Path,
) -> None:
    page = chat_page
    apply_look(page, look)
    fake_providers.script([Text("Pack **light**.")])
    answered(page, live_owner, "Trip to Lisbon", "What should I pack?")
    assert_scheme(page, look)

    downloads = {}
    for label in ("Markdown (.md)", "JSON (.json)"):
        page.locator("#export summary").click()
        with page.expect_download() as info:
            page.get_by_role("link", name=label).click()
        download = info.value
        path = tmp_path / download.suggested_filename
        download.save_as(path)
        downloads[label] = (download.suggested_filename, path.read_text())
        expect(page.get_by_role("link", name=label)).to_be_hidden()  # the menu closed

    name, markdown = downloads["Markdown (.md)"]
    assert name.endswith(".md")
    assert "Trip to Lisbon" in name
    assert "What should I pack?" in markdown
    assert "Pack **light**." in markdown
    name, text = downloads["JSON (.json)"]
    assert name.endswith(".json")
    exported = json.loads(text)
    assert "What should I pack?" in json.dumps(exported)
    assert "sk-ant" not in text
    assert "sk-ant" not in markdown
