"""Finding and keeping conversations from the chat page in real Chromium, at 1280 and 375
pixels, light and dark: the sidebar's search (titles and message text, with snippets) and
the export of a conversation as a Markdown or JSON download.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import FloatRect, Locator, Page, expect

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


def outline_sides(page: Page, target: Locator) -> dict[str, bool]:
    """Which sides of `target`'s outline are painted, read from a screenshot of its edges."""
    style = target.evaluate(
        "n => { const s = getComputedStyle(n); return [s.outlineColor, s.outlineOffset, s.outlineWidth]; }"
    )
    colour = [int(c) for c in re.findall(r"\d+", style[0])[:3]]
    reach = float(style[1].removesuffix("px")) + float(style[2].removesuffix("px"))
    box = target.bounding_box()
    assert box is not None
    assert reach > 0, style
    margin = int(reach) + 3
    clip: FloatRect = {
        "x": box["x"] - margin,
        "y": box["y"] - margin,
        "width": box["width"] + 2 * margin,
        "height": box["height"] + 2 * margin,
    }
    shot = base64.b64encode(page.screenshot(clip=clip)).decode()
    reader = page.context.new_page()  # about:blank: no CSP keeps a canvas from reading the picture
    try:
        return dict(
            reader.evaluate(
                """async ([shot, colour, margin]) => {
                    const image = new Image();
                    image.src = `data:image/png;base64,${shot}`;
                    await image.decode();
                    const canvas = document.createElement("canvas");
                    canvas.width = image.width;
                    canvas.height = image.height;
                    const context = canvas.getContext("2d");
                    context.drawImage(image, 0, 0);
                    const like = (x, y) => {
                        const [r, g, b] = context.getImageData(x, y, 1, 1).data;
                        return Math.abs(r - colour[0]) + Math.abs(g - colour[1]) + Math.abs(b - colour[2]) < 60;
                    };
                    const any = (points) => points.some(([x, y]) => like(x, y));
                    const [w, h] = [image.width, image.height];
                    const near = [...Array(margin).keys()];
                    const [midX, midY] = [Math.floor(w / 2), Math.floor(h / 2)];
                    return [
                        ["left", any(near.map((i) => [i, midY]))],
                        ["right", any(near.map((i) => [w - 1 - i, midY]))],
                        ["top", any(near.map((i) => [midX, i]))],
                        ["bottom", any(near.map((i) => [midX, h - 1 - i]))],
                    ];
                }""",
                [shot, colour, margin],
            )
        )
    finally:
        reader.close()


def test_a_message_opened_from_a_link_or_a_search_is_outlined_on_every_side(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    fake_providers.script([Text("Cherry tomatoes tolerate partial shade well.")])
    garden = answered(page, live_owner, "Garden", "Which tomatoes grow in shade?")
    [question, _] = live_owner.messages(garden)["messages"]
    every_side = {"left": True, "right": True, "top": True, "bottom": True}

    # A link to the turn (a task run's, a needs-you entry's) outlines the owner's message.
    page.goto("/settings/")  # a link opens the chat page anew, not a jump within it
    page.goto(f"/?c={garden}#turn-{question['turn_id']}")
    linked = page.locator("#transcript .turn.linked .msg.user .bubble")
    expect(linked).to_be_visible()
    assert outline_sides(page, linked) == every_side

    # A search result outlines the message that matched: here the answer, as wide as the turn.
    search = page.get_by_role("searchbox", name="Search conversations")
    search.fill("tolerate")
    page.get_by_role("list", name="Search results").locator("a").first.click()
    found = page.locator("#transcript .msg.assistant.found")
    expect(found).to_be_visible()
    assert outline_sides(page, found) == every_side


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
