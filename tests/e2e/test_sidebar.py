"""The chat page's sidebar in real Chromium: long names, titles from first messages and from
the model, the order other tabs change live, New chat, and where focus goes after a delete, at
1280 and 375 pixels and in both color schemes.

Layout is checked as the owner sees it: bounding boxes of the rows' controls against the
sidebar's, whether a name shows an ellipsis, and whether anything scrolls sideways.
"""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import urlparse

import pytest
from playwright.sync_api import FloatRect, Locator, Page, expect

from conversations.titles import TITLE_INSTRUCTIONS
from conversations.titling import TITLE_MAX_TOKENS
from tests.e2e.chat_support import (
    UNDO_MS,
    conversation_ids_eventually,
    conversations,
    last_answer,
    open_conversation,
    send,
    sidebar_names,
    undo_runs_out,
)
from tests.e2e.conftest import screenshot, until
from tests.support.fake_providers import FakeProviders, Hold, Text
from tests.support.live_clients import OwnerClient, message_text

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WIDTHS = [pytest.param(1280, id="1280px"), pytest.param(375, id="375px")]
LONG_NAMES = [
    "Plan for the kitchen renovation budget and timeline",
    "Questions for the contractor about permits, insurance, start dates and what happens if it rains",
    "Pneumonoultramicroscopicsilicovolcanoconiosis_and_other_very_long_words_without_any_space_at_all",
    "Holiday 2027: flights, hotels, the rental car, museum tickets, restaurants and a packing list",
]
# The page's own background in each scheme (base.css): proof that the scheme took effect.
BACKGROUNDS = {"light": "rgb(255, 255, 255)", "dark": "rgb(20, 20, 23)"}


def show_sidebar(page: Page, width: int) -> Locator:
    """The sidebar, opened behind its toggle on a narrow screen."""
    sidebar = page.locator("#sidebar")
    if width < 760:
        page.get_by_role("button", name="Show conversations").click()
        # It slides in: measure it where it comes to rest.
        expect(sidebar).to_have_css("transform", "none")
    expect(sidebar).to_be_visible()
    return sidebar


def box(locator: Locator) -> FloatRect:
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not rendered"
    return found


def assert_inside(inner: Locator, outer: FloatRect, what: str) -> None:
    b = box(inner)
    assert b["width"] > 0, what
    assert b["x"] >= outer["x"] - 0.5, (what, b, outer)
    assert b["x"] + b["width"] <= outer["x"] + outer["width"] + 0.5, (what, b, outer)


def sideways(page: Page) -> dict[str, Any]:
    """How the sidebar and its list scroll sideways (they never should)."""
    return page.evaluate(
        """() => {
            const sidebar = document.getElementById("sidebar");
            const list = sidebar.querySelector(".conversations");
            return {
                sidebar: sidebar.scrollWidth - sidebar.clientWidth,
                list: list.scrollWidth - list.clientWidth,
                scrollLeft: sidebar.scrollLeft + list.scrollLeft,
            };
        }"""
    )


def focused_in_sidebar(page: Page) -> dict[str, Any]:
    return page.evaluate(
        """() => {
            const active = document.activeElement;
            const sidebar = document.getElementById("sidebar").getBoundingClientRect();
            const r = active.getBoundingClientRect();
            return {
                inside: r.left >= sidebar.left - 0.5 && r.right <= sidebar.right + 0.5,
                row: active.closest("li")?.dataset.conversationId || null,
                label: active.getAttribute("aria-label") || active.textContent,
            };
        }"""
    )


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_it_keeps_every_rows_buttons_inside_the_sidebar_whatever_the_names(
    chat_page: Page, live_owner: OwnerClient, width: int, scheme: str
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]
    ids = [live_owner.create_conversation(name) for name in reversed(LONG_NAMES)]
    live_owner.create_conversation("Short")
    page.goto("/")
    expect(sidebar_names(page)).to_have_count(len(LONG_NAMES) + 1)
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == BACKGROUNDS[scheme]
    sidebar = show_sidebar(page, width)
    outer = box(sidebar)

    for conversation_id, name in zip(reversed(ids), LONG_NAMES, strict=True):
        row = page.locator(f'#conversation-list li[data-conversation-id="{conversation_id}"]')
        link = row.locator(".conversation-link")
        expect(link).to_have_attribute("title", name)
        assert_inside(link, outer, f"name of {name}")
        assert_inside(row.get_by_role("button", name=f"Rename {name}"), outer, f"rename of {name}")
        assert_inside(row.get_by_role("button", name=f"Delete {name}"), outer, f"delete of {name}")
        cut = link.evaluate(
            "(a) => ({over: a.scrollWidth > a.clientWidth, style: getComputedStyle(a).textOverflow,"
            " wrap: getComputedStyle(a).whiteSpace})"
        )
        assert cut == {"over": True, "style": "ellipsis", "wrap": "nowrap"}, name
    assert sideways(page) == {"sidebar": 0, "list": 0, "scrollLeft": 0}
    screenshot(page, f"sidebar-long-names-{width}-{scheme}")

    # Tab through every row's name, rename and delete: nothing scrolls sideways.
    page.get_by_role("searchbox", name="Search conversations").focus()  # the last stop before the rows
    seen = set()
    for _ in range(3 * (len(LONG_NAMES) + 1)):
        page.keyboard.press("Tab")
        focus = focused_in_sidebar(page)
        assert focus["row"] is not None, focus
        assert focus["inside"], focus
        assert sideways(page)["scrollLeft"] == 0, focus
        seen.add((focus["row"], focus["label"]))
    assert len(seen) == 3 * (len(LONG_NAMES) + 1)

    # The rename form and the delete question fit as well, their buttons whole.
    name = LONG_NAMES[1]
    page.get_by_role("button", name=f"Rename {name}").click()
    field = page.get_by_role("textbox", name="Conversation name")
    expect(field).to_be_focused()
    form = page.locator(".rename-form")
    regenerate = form.get_by_role("button", name="Regenerate title")
    save, cancel = form.get_by_role("button", name="Save"), form.get_by_role("button", name="Cancel")
    for control in (field, regenerate, save, cancel):
        assert_inside(control, outer, "rename form")
        expect(control).to_be_in_viewport(ratio=1)
    page.keyboard.press("Tab")
    expect(regenerate).to_be_focused()
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(form.get_by_role("button", name="Cancel")).to_be_focused()
    assert sideways(page) == {"sidebar": 0, "list": 0, "scrollLeft": 0}
    screenshot(page, f"sidebar-rename-{width}-{scheme}")
    form.get_by_role("button", name="Cancel").click()

    page.get_by_role("button", name=f"Delete {LONG_NAMES[2]}").click()
    question = page.locator(".delete-confirm")
    for control in (question.get_by_role("button", name="Delete"), question.get_by_role("button", name="Cancel")):
        assert_inside(control, outer, "delete question")
        expect(control).to_be_in_viewport(ratio=1)
    assert sideways(page) == {"sidebar": 0, "list": 0, "scrollLeft": 0}
    question.get_by_role("button", name="Cancel").click()
    expect(sidebar_names(page)).to_have_count(len(LONG_NAMES) + 1)


@pytest.mark.parametrize("width", WIDTHS)
def test_it_creates_a_conversation_with_its_first_message_and_titles_it(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    older = live_owner.create_conversation("Older one")
    open_conversation(page, older)
    composer = page.get_by_role("textbox", name="Message")
    composer.fill("half-written thought")

    for _ in range(2):
        show_sidebar(page, width)
        page.get_by_role("button", name="New chat").click()
        expect(page).to_have_url(re.compile(r"/$"))
        expect(composer).to_be_focused()
        expect(composer).to_have_value("")
        expect(page.locator("#empty-state")).to_be_visible()
        expect(page.locator("#conversation-title")).to_have_text("Flarebot")
    assert [c["id"] for c in conversations(live_owner)] == [older]
    expect(sidebar_names(page)).to_have_text(["Older one"])

    first = "Plan for the kitchen renovation budget and timeline, with the contractors to call"
    send(page, first)
    title = "Plan for the kitchen renovation budget and timeline, with"  # cut, no "…" stored
    expect(last_answer(page)).to_have_text("Hello from the fake model.")
    expect(sidebar_names(page)).to_have_text([title, "Older one"])
    expect(page.locator("#conversation-title")).to_have_text(title)
    [created, _] = conversations(live_owner)
    assert created["name"] == title
    expect(page).to_have_url(re.compile(rf"\?c={created['id']}$"))
    assert [message_text(m) for m in live_owner.messages(created["id"])["messages"]] == [
        first,
        "Hello from the fake model.",
    ]

    send(page, "And a second question that must not rename it")
    expect(page.locator("#transcript .msg.assistant")).to_have_count(2)
    expect(page.locator("#transcript .msg.assistant").last).to_have_text("Hello from the fake model.")
    expect(sidebar_names(page)).to_have_text([title, "Older one"])

    # Every New chat is titled, not only the first one.
    show_sidebar(page, width)
    page.get_by_role("button", name="New chat").click()
    send(page, "Dinner\n\nfor four on Friday")
    expect(sidebar_names(page)).to_have_text(["Dinner for four on Friday", title, "Older one"])
    assert [c["name"] for c in conversations(live_owner)] == ["Dinner for four on Friday", title, "Older one"]
    expect(page.locator("#notice")).to_be_hidden()


def test_it_titles_an_untitled_conversation_from_a_message_sent_on_its_socket(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    created = live_owner.api("POST", "/api/conversations/", json={})
    assert created.status_code == 201
    conversation_id = created.json()["id"]
    open_conversation(page, conversation_id)
    expect(sidebar_names(page)).to_have_text(["New conversation"])

    send(page, "Which plants survive a north-facing balcony?")

    expect(sidebar_names(page)).to_have_text(["Which plants survive a north-facing balcony?"])
    expect(page.locator("#conversation-title")).to_have_text("Which plants survive a north-facing balcony?")
    assert [c["name"] for c in conversations(live_owner)] == ["Which plants survive a north-facing balcony?"]


def test_the_model_titles_a_conversation_after_its_first_answer_and_the_owner_can_regenerate_it(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    held = Hold(seconds=60)  # the title request answers when the test says
    fake_providers.titles([held, Text("“Balcony plants for north light”.")], "Shade-loving balcony plants")
    page.goto("/")
    expect(page.locator("body")).to_have_attribute("data-ready", "1")

    send(page, "Which plants survive on a north-facing balcony in Hamburg, with little sun and a lot of wind?")
    expect(last_answer(page)).to_have_text("Hello from the fake model.")
    cut = "Which plants survive on a north-facing balcony in Hamburg"
    until(page, lambda: len(fake_providers.title_requests) == 1, "the title request after the first answer")
    # Until the model answers, the cut first message names it.
    expect(sidebar_names(page)).to_have_text([cut])
    expect(page.locator("#conversation-title")).to_have_text(cut)
    held.release()

    title = "Balcony plants for north light"
    expect(sidebar_names(page)).to_have_text([title])
    expect(page.locator("#conversation-title")).to_have_text(title)
    assert [c["name"] for c in conversations(live_owner)] == [title]
    [asked] = fake_providers.title_requests
    assert (asked.body["system"], asked.body["max_tokens"]) == (TITLE_INSTRUCTIONS, TITLE_MAX_TOKENS)
    assert "north-facing balcony" in asked.body["messages"][0]["content"][0]["text"]
    assert len(fake_providers.requests) == 1  # the answer's; the title took no turn's script

    page.get_by_role("button", name=f"Rename {title}").click()
    field = page.get_by_role("textbox", name="Conversation name")
    page.locator(".rename-form").get_by_role("button", name="Regenerate title").click()
    expect(field).to_have_value("Shade-loving balcony plants")
    expect(field).to_be_focused()
    assert [c["name"] for c in conversations(live_owner)] == [title]  # suggested, not stored
    field.press("Enter")

    expect(sidebar_names(page)).to_have_text(["Shade-loving balcony plants"])
    assert [c["name"] for c in conversations(live_owner)] == ["Shade-loving balcony plants"]
    assert len(fake_providers.title_requests) == 2
    expect(page.locator("#notice")).to_be_hidden()


def test_the_sidebar_moves_a_conversation_up_and_renames_it_live_when_another_device_does(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    older = live_owner.create_conversation("Older")
    newer = live_owner.create_conversation("Newer")
    open_conversation(page, newer)
    expect(sidebar_names(page)).to_have_text(["Newer", "Older"])
    lists: list[str] = []
    page.on("request", lambda r: lists.append(r.url) if urlparse(r.url).path == "/api/conversations/" else None)

    sent = live_owner.api(
        "POST", f"/api/conversations/{older}/messages/", json={"request_id": str(uuid.uuid4()), "text": "Still there?"}
    )
    assert sent.status_code == 202, sent.text
    expect(sidebar_names(page)).to_have_text(["Older", "Newer"])
    renamed = live_owner.api("PATCH", f"/api/conversations/{older}/", json={"name": "Older, renamed elsewhere"})
    assert renamed.status_code == 200, renamed.text
    expect(sidebar_names(page)).to_have_text(["Older, renamed elsewhere", "Newer"])

    assert lists == []  # the socket said so; the page read no list again
    expect(page.locator(f'.conversation[data-conversation-id="{newer}"] .conversation-link')).to_have_attribute(
        "aria-current", "page"
    )


def test_it_moves_a_conversation_up_with_a_new_message_but_not_with_a_rename(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    older = live_owner.create_conversation("Older")
    live_owner.create_conversation("Newer")
    page.goto("/")
    expect(sidebar_names(page)).to_have_text(["Newer", "Older"])

    page.get_by_role("button", name="Rename Older").click()
    field = page.get_by_role("textbox", name="Conversation name")
    field.fill("Older, renamed")
    field.press("Enter")
    expect(sidebar_names(page)).to_have_text(["Newer", "Older, renamed"])
    page.reload()
    expect(sidebar_names(page)).to_have_text(["Newer", "Older, renamed"])

    page.locator(f'.conversation[data-conversation-id="{older}"] .conversation-link').click()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    send(page, "Still there?")
    expect(sidebar_names(page)).to_have_text(["Older, renamed", "Newer"])
    assert [c["name"] for c in conversations(live_owner)] == ["Older, renamed", "Newer"]


@pytest.mark.parametrize("width", WIDTHS)
def test_it_moves_focus_to_the_next_conversation_after_a_delete(
    chat_page: Page, live_owner: OwnerClient, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    first = live_owner.create_conversation("First")
    second = live_owner.create_conversation("Second")
    third = live_owner.create_conversation("Third")
    page.clock.install()
    open_conversation(page, second)
    expect(sidebar_names(page)).to_have_text(["Third", "Second", "First"])

    def delete(name: str) -> None:
        page.get_by_role("button", name=f"Delete {name}").click()
        expect(page.locator(".delete-confirm .cancel")).to_be_focused()
        page.keyboard.press("Shift+Tab")
        expect(page.locator(".confirm-delete")).to_be_focused()
        page.keyboard.press("Enter")

    def link(conversation_id: str) -> Locator:
        return page.locator(f'.conversation[data-conversation-id="{conversation_id}"] .conversation-link')

    show_sidebar(page, width)
    delete("Second")  # the open one, in the middle: the next row takes focus and opens
    expect(sidebar_names(page)).to_have_text(["Third", "First"])
    expect(link(first)).to_be_focused()
    expect(page).to_have_url(re.compile(rf"\?c={first}$"))
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.locator("#notice")).to_be_hidden()

    delete("First")  # the last row: the one before it
    expect(sidebar_names(page)).to_have_text(["Third"])
    expect(link(third)).to_be_focused()
    expect(page).to_have_url(re.compile(rf"\?c={third}$"))

    delete("Third")  # none left: New chat
    expect(sidebar_names(page)).to_have_count(0)
    expect(page.get_by_role("button", name="New chat")).to_be_focused()
    expect(page).to_have_url(re.compile(r"/$"))
    assert page.evaluate("document.activeElement !== document.body")
    undo_runs_out(page, live_owner, [])


def test_it_keeps_focus_in_an_open_delete_question_when_the_list_refreshes(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    other = live_owner.create_conversation("Other")
    current = live_owner.create_conversation("Current")
    open_conversation(page, current)
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    is_list = lambda response: urlparse(response.url).path == "/api/conversations/"  # noqa: E731

    with page.expect_response(is_list):
        send(page, "Hello there")  # its acknowledgement refreshes the list a moment later
        page.get_by_role("button", name="Delete Other").click()
        cancel = page.locator(f'.conversation[data-conversation-id="{other}"] .delete-confirm .cancel')
        expect(cancel).to_be_focused()
    page.wait_for_timeout(100)  # the refreshed list is on screen

    expect(cancel).to_be_focused()
    page.keyboard.press("Enter")  # cancels: nothing was deleted
    assert sorted(c["name"] for c in conversations(live_owner)) == ["Current", "Other"]


@pytest.mark.parametrize("width", WIDTHS)
def test_deleting_the_open_conversation_opens_the_next_and_offers_undo_for_ten_seconds(
    chat_page: Page, live_owner: OwnerClient, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    first = live_owner.create_conversation("First")
    second = live_owner.create_conversation("Second")
    page.clock.install()
    open_conversation(page, second)
    show_sidebar(page, width)

    page.get_by_role("button", name="Delete Second").click()
    page.locator(".confirm-delete").click()

    expect(page).to_have_url(re.compile(rf"\?c={first}$"))
    expect(page.locator("#conversation-title")).to_have_text("First")
    bar = page.locator(".undo-bar")
    expect(bar).to_contain_text("Deleted “Second”.")
    screenshot(page, f"sidebar-undo-{width}")
    bar.get_by_role("button", name="Undo").click()

    expect(sidebar_names(page)).to_have_text(["Second", "First"])
    expect(page).to_have_url(re.compile(rf"\?c={second}$"))
    expect(bar).to_have_count(0)
    deletions: list[str] = []
    page.on("request", lambda request: deletions.append(request.url) if request.method == "DELETE" else None)
    page.clock.fast_forward(UNDO_MS + 1_000)  # past the Undo's time: nothing is deleted after all
    page.wait_for_timeout(500)  # time for a request the page would (wrongly) send now
    assert deletions == []
    assert sorted(c["name"] for c in conversations(live_owner)) == ["First", "Second"]

    page.get_by_role("button", name="Delete Second").click()
    page.locator(".confirm-delete").click()
    page.goto("/")  # leaving the page sends the deletion at once
    conversation_ids_eventually(live_owner, [first])
