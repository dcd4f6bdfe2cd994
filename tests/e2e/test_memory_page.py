"""The Memory section of the settings page in Chromium: add, edit, conflicts, delete, limits,
and at 200 facts: a bounded list of light rows, the filter, and deleting a selection at once.

Served under the app's Content-Security-Policy like the rest of the settings page (the
`settings_page` fixture of test_settings.py), at desktop size and at 375 px, light and dark,
by mouse and by keyboard. Changes made "elsewhere" go through the services while the page is
open.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from memory import services
from memory.models import Fact, FactState
from tests.e2e.chat_support import LOOKS, apply_look, assert_scheme
from tests.e2e.conftest import screenshot
from tests.e2e.settings_support import Dialogs, api_get, dialogs, settings_page

__all__ = ["dialogs", "settings_page"]

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def facts_listed(page: Page) -> Locator:
    return page.locator("#memory-list .fact")


def item(page: Page, text: str) -> Locator:
    return facts_listed(page).filter(has=page.locator(".fact-text", has_text=text))


def stored() -> list[dict[str, Any]]:
    return [dict(f) for f in Fact.objects.filter(state=FactState.ACTIVE).values("content", "version")]


def reload(page: Page) -> None:
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")


def messages(page: Page) -> list[str]:
    """The section's messages a person sees now (the note that memory is full is one of them)."""
    return [text for text in page.locator("#memory .message:visible").all_inner_texts() if text.strip()]


def texts_shown(page: Page) -> list[str]:
    return page.locator("#memory-list .fact:visible .fact-text").all_inner_texts()


def no_sideways_scroll(page: Page, width: int) -> None:
    """Nothing scrolls sideways, and every control of the section shown is whole within the width."""
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] == width
    outside = page.evaluate(
        """(width) => Array.from(document.querySelectorAll("#memory button, #memory input"))
            .map((control) => [control, control.getBoundingClientRect()])
            .filter(([, box]) => box.width > 0 && (box.left < 0 || box.right > width))
            .map(([control]) => control.outerHTML)""",
        width,
    )
    assert outside == []


def test_owner_adds_a_fact_that_survives_a_reload(settings_page: Page) -> None:
    page = settings_page
    expect(page.locator("#memory-count")).to_have_text("0 of 200 facts")
    expect(page.locator("#memory-empty")).to_be_visible()
    text = "My cat is called Miso.\n\tShe likes tuna. 🐟"  # the fish is 2 UTF-16 code units

    page.get_by_label("New fact").fill(text)
    expect(page.locator("#memory-new-counter")).to_have_text(f"{len(text) + 1} / 1,000")
    page.get_by_role("button", name="Add fact").click()

    expect(page.locator("#memory-add-message")).to_have_text("Added.")
    expect(facts_listed(page)).to_have_count(1)
    expect(facts_listed(page).first.locator(".fact-text")).to_have_text(text)
    expect(page.locator("#memory-count")).to_have_text("1 of 200 facts")
    expect(page.get_by_label("New fact")).to_have_value("")
    expect(page.locator("#memory-empty")).to_be_hidden()
    assert stored() == [{"content": text, "version": 1}]
    reload(page)
    expect(facts_listed(page).first.locator(".fact-text")).to_have_text(text)
    assert [f["content"] for f in api_get(page, "/api/memories/")["memories"]] == [text]


def test_the_newest_fact_comes_first(settings_page: Page) -> None:
    for text in ("First fact.", "Second fact."):
        services.fact_create(content=text)
    page = settings_page
    reload(page)

    page.get_by_label("New fact").fill("Third fact.")
    page.get_by_role("button", name="Add fact").click()

    expect(facts_listed(page).locator(".fact-text")).to_have_text(["Third fact.", "Second fact.", "First fact."])


def test_owner_edits_a_fact(settings_page: Page) -> None:
    services.fact_create(content="Lives in Lisbon.")
    page = settings_page
    reload(page)
    fact = facts_listed(page).first

    fact.get_by_role("button", name="Edit").click()
    draft = fact.get_by_label("Edit fact")
    expect(draft).to_be_focused()
    expect(draft).to_have_value("Lives in Lisbon.")
    draft.fill("Lives in Porto.")
    fact.get_by_role("button", name="Save").click()

    expect(fact.locator("[data-role=message]")).to_have_text("Saved.")
    expect(fact.locator(".fact-text").first).to_have_text("Lives in Porto.")
    expect(fact.get_by_role("button", name="Edit")).to_be_focused()
    assert stored() == [{"content": "Lives in Porto.", "version": 2}]


def test_a_version_conflict_shows_the_current_text_and_keeps_the_draft(settings_page: Page) -> None:
    fact_row = services.fact_create(content="Lives in Lisbon.")
    page = settings_page
    reload(page)
    fact = facts_listed(page).first
    fact.get_by_role("button", name="Edit").click()
    fact.get_by_label("Edit fact").fill("Lives in Faro, by the sea.")
    services.fact_update(fact_id=fact_row.id, content="Lives in Porto.", version=1)  # elsewhere

    fact.get_by_role("button", name="Save").click()

    expect(fact.locator("[data-role=conflict]")).to_be_visible()
    expect(fact.locator("[data-role=current]")).to_have_text("Lives in Porto.")
    expect(fact.get_by_label("Edit fact")).to_have_value("Lives in Faro, by the sea.")
    expect(fact.locator("[data-role=message]")).to_have_text("Not saved: the fact is now at version 2.")
    assert stored() == [{"content": "Lives in Porto.", "version": 2}]
    screenshot(page, "memory-conflict")

    fact.get_by_role("button", name="Save").click()  # now on purpose, over version 2

    expect(fact.locator("[data-role=message]")).to_have_text("Saved.")
    expect(fact.locator("[data-role=conflict]")).to_be_hidden()
    expect(fact.locator(".fact-text").first).to_have_text("Lives in Faro, by the sea.")
    assert stored() == [{"content": "Lives in Faro, by the sea.", "version": 3}]


def test_cancel_after_a_conflict_keeps_the_current_text(settings_page: Page) -> None:
    fact_row = services.fact_create(content="Lives in Lisbon.")
    page = settings_page
    reload(page)
    fact = facts_listed(page).first
    fact.get_by_role("button", name="Edit").click()
    fact.get_by_label("Edit fact").fill("Lives in Faro.")
    services.fact_update(fact_id=fact_row.id, content="Lives in Porto.", version=1)
    fact.get_by_role("button", name="Save").click()
    expect(fact.locator("[data-role=conflict]")).to_be_visible()

    fact.get_by_role("button", name="Cancel").click()

    expect(fact.locator(".fact-text").first).to_have_text("Lives in Porto.")
    assert stored() == [{"content": "Lives in Porto.", "version": 2}]


def test_a_fact_deleted_elsewhere_keeps_the_draft_in_the_add_box(settings_page: Page) -> None:
    fact_row = services.fact_create(content="Lives in Lisbon.")
    page = settings_page
    reload(page)
    fact = facts_listed(page).first
    fact.get_by_role("button", name="Edit").click()
    fact.get_by_label("Edit fact").fill("Lives in Faro.")
    services.fact_delete(fact_id=fact_row.id, version=1)

    fact.get_by_role("button", name="Save").click()

    expect(facts_listed(page)).to_have_count(0)
    expect(page.get_by_label("New fact")).to_have_value("Lives in Faro.")
    expect(page.get_by_label("New fact")).to_be_focused()
    expect(page.locator("#memory-add-message")).to_contain_text("deleted elsewhere")
    assert stored() == []


def test_owner_deletes_a_fact_after_confirming(settings_page: Page, dialogs: Dialogs) -> None:
    services.fact_create(content="Keep me.")
    services.fact_create(content="The door code is 4711.")
    page = settings_page
    reload(page)
    fact = item(page, "The door code is 4711.")

    fact.get_by_role("button", name="Delete").click()
    expect(fact.get_by_role("group", name="Confirm deletion")).to_contain_text("older transcripts may still quote it")
    expect(fact.get_by_role("button", name="Keep")).to_be_focused()
    fact.get_by_role("button", name="Keep").click()
    expect(fact.get_by_role("group", name="Confirm deletion")).to_be_hidden()
    assert len(stored()) == 2

    fact.get_by_role("button", name="Delete").click()
    fact.get_by_role("button", name="Delete fact").click()

    expect(facts_listed(page)).to_have_count(1)
    expect(page.locator("#memory-count")).to_have_text("1 of 200 facts")
    expect(page.locator("#memory-add-message")).to_have_text("Fact deleted. It no longer reaches the model.")
    assert stored() == [{"content": "Keep me.", "version": 1}]
    assert Fact.objects.get(state=FactState.DELETED).content == ""
    assert dialogs == []  # an inline confirmation, not a browser dialog


def test_a_stale_delete_keeps_the_fact_and_shows_its_current_text(settings_page: Page) -> None:
    fact_row = services.fact_create(content="Lives in Lisbon.")
    page = settings_page
    reload(page)
    fact = facts_listed(page).first
    services.fact_update(fact_id=fact_row.id, content="Lives in Porto.", version=1)

    fact.get_by_role("button", name="Delete").click()
    fact.get_by_role("button", name="Delete fact").click()

    expect(fact.locator("[data-role=message]")).to_contain_text("Not deleted: this fact was changed elsewhere")
    expect(fact.locator(".fact-text").first).to_have_text("Lives in Porto.")
    assert stored() == [{"content": "Lives in Porto.", "version": 2}]


@pytest.mark.parametrize(
    ("draft", "why"),
    [
        ("   \n ", "must not be blank"),
        ("ring the \x07 bell", "only tabs and line breaks may be control characters"),
    ],
    ids=["blank", "control-character"],
)
def test_an_invalid_fact_is_refused_with_the_reason_and_the_draft_kept(settings_page: Page, draft, why) -> None:
    page = settings_page
    box = page.get_by_label("New fact")

    box.fill(draft)
    page.get_by_role("button", name="Add fact").click()

    expect(page.locator("#memory-add-message")).to_contain_text(why)
    expect(box).to_have_value(draft)
    expect(box).to_have_attribute("aria-invalid", "true")
    assert stored() == []


def test_the_length_limit_shows_before_it_is_hit_and_holds_at_its_edge(settings_page: Page) -> None:
    page = settings_page
    box, counter = page.get_by_label("New fact"), page.locator("#memory-new-counter")
    at_limit = "😀" * 500  # 500 characters, 1,000 UTF-16 code units

    box.fill(at_limit + "x")
    expect(counter).to_have_text("1,001 / 1,000 (1 over)")
    expect(counter).to_have_attribute("data-over", "1")
    page.get_by_role("button", name="Add fact").click()
    expect(page.locator("#memory-add-message")).to_contain_text("at most 1,000 characters")
    expect(box).to_have_value(at_limit + "x")
    assert stored() == []

    box.fill(at_limit)
    expect(counter).to_have_text("1,000 / 1,000")
    page.get_by_role("button", name="Add fact").click()
    expect(page.locator("#memory-add-message")).to_have_text("Added.")
    assert stored() == [{"content": at_limit, "version": 1}]


ONE_MESSAGE_LOOKS = [pytest.param((1280, "light"), id="light-1280px"), pytest.param((375, "dark"), id="dark-375px")]
FILLED = "Added. Memory is now full (200 of 200): delete a fact to add another."
FULL_NOTE = "Memory is full: 200 of 200 facts. Delete a fact to add another."


@pytest.mark.parametrize("look", ONE_MESSAGE_LOOKS)
def test_adding_the_200th_fact_says_so_in_one_message_and_the_add_form_closes(
    settings_page: Page, look: tuple[int, str]
) -> None:
    Fact.objects.bulk_create(Fact(content=f"Fact number {i}.") for i in range(199))
    page = settings_page
    apply_look(page, look)
    reload(page)
    assert_scheme(page, look)
    expect(page.locator("#memory-count")).to_have_text("199 of 200 facts")
    expect(page.locator("#memory-full")).to_be_hidden()

    page.get_by_label("New fact").fill("The 200th fact.")
    page.get_by_role("button", name="Add fact").click()

    expect(page.locator("#memory-count")).to_have_text("200 of 200 facts")
    expect(page.locator("#memory-add-message")).to_have_text(FILLED)
    assert messages(page) == [FILLED]  # never "Added." beside "Memory is full"
    expect(page.get_by_label("New fact")).to_be_disabled()
    expect(page.get_by_role("button", name="Add fact")).to_be_disabled()
    page.locator("#memory").scroll_into_view_if_needed()
    screenshot(page, f"memory-full-{look[0]}-{look[1]}")

    # Another message takes its place: the note then says why the box is closed.
    page.get_by_role("button", name="Reload").click()
    expect(page.locator("#memory-add-message")).to_be_hidden()  # "Reloading…", then nothing
    expect(page.locator("#memory-full")).to_have_text(FULL_NOTE)
    assert messages(page) == [FULL_NOTE]

    facts_listed(page).first.get_by_role("button", name="Delete").click()
    facts_listed(page).first.get_by_role("button", name="Delete fact").click()

    expect(page.locator("#memory-count")).to_have_text("199 of 200 facts")
    expect(page.get_by_label("New fact")).to_be_enabled()
    expect(page.locator("#memory-full")).to_be_hidden()
    assert messages(page) == ["Fact deleted. It no longer reaches the model."]


def test_memory_filled_elsewhere_is_said_once_when_an_add_is_refused(settings_page: Page) -> None:
    Fact.objects.bulk_create(Fact(content=f"Fact number {i}.") for i in range(199))
    page = settings_page
    reload(page)
    services.fact_create(content="The 200th, added elsewhere.")

    page.get_by_label("New fact").fill("One too many.")
    page.get_by_role("button", name="Add fact").click()

    expect(page.locator("#memory-count")).to_have_text("200 of 200 facts")  # reloaded after the refusal
    expect(page.locator("#memory-add-message")).to_contain_text("Memory is full: at most 200 facts")
    assert len(messages(page)) == 1, messages(page)
    expect(page.get_by_label("New fact")).to_have_value("One too many.")
    assert len(stored()) == 200


def test_reload_shows_what_changed_elsewhere(settings_page: Page) -> None:
    page = settings_page
    services.fact_create(content="Added elsewhere.")

    page.get_by_role("button", name="Reload").click()

    expect(facts_listed(page).locator(".fact-text")).to_have_text(["Added elsewhere."])
    expect(page.locator("#memory-count")).to_have_text("1 of 200 facts")


def test_the_section_says_what_deleting_does(settings_page: Page) -> None:
    expect(settings_page.locator("#memory .hint")).to_contain_text(
        "Deleting a fact stops it from reaching the model, while older transcripts may still quote it."
    )


def test_everything_works_by_keyboard(settings_page: Page) -> None:
    page = settings_page
    page.get_by_label("New fact").focus()
    page.keyboard.type("Typed by keyboard.")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Add fact")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#memory-add-message")).to_have_text("Added.")
    fact = facts_listed(page).first

    # From the add box: Add fact, Reload, the filter, Select all shown (Delete selected is off),
    # the fact's checkbox, its Edit.
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("searchbox", name="Filter facts")).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("checkbox", name="Select all shown")).to_be_focused()
    page.keyboard.press("Tab")
    expect(fact.get_by_role("checkbox", name="Typed by keyboard.")).to_be_focused()
    page.keyboard.press("Tab")
    expect(fact.get_by_role("button", name="Edit")).to_be_focused()
    page.keyboard.press("Enter")
    expect(fact.get_by_label("Edit fact")).to_be_focused()
    page.keyboard.press("Escape")  # cancels, back on Edit
    expect(fact.get_by_role("button", name="Edit")).to_be_focused()
    page.keyboard.press("Enter")
    page.keyboard.press("End")
    page.keyboard.type(" Edited.")
    page.keyboard.press("Tab")
    expect(fact.get_by_role("button", name="Save")).to_be_focused()
    page.keyboard.press("Enter")
    expect(fact.locator("[data-role=message]")).to_have_text("Saved.")
    expect(fact.get_by_role("button", name="Edit")).to_be_focused()
    assert stored() == [{"content": "Typed by keyboard. Edited.", "version": 2}]

    page.keyboard.press("Tab")
    expect(fact.get_by_role("button", name="Delete")).to_be_focused()
    page.keyboard.press("Enter")
    expect(fact.get_by_role("button", name="Keep")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(fact.get_by_role("button", name="Delete fact")).to_be_focused()
    page.keyboard.press("Enter")

    expect(facts_listed(page)).to_have_count(0)
    expect(page.get_by_label("New fact")).to_be_focused()
    assert stored() == []


def test_a_selection_is_deleted_by_keyboard(settings_page: Page) -> None:
    for text in ("Keep this one.", "Drop tea.", "Drop coffee."):
        services.fact_create(content=text)
    page = settings_page
    reload(page)
    page.get_by_role("searchbox", name="Filter facts").focus()

    page.keyboard.type("drop")
    page.keyboard.press("Tab")
    page.keyboard.press("Space")  # Select all shown
    expect(page.locator("#memory-selected")).to_have_text("2 selected")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Delete 2 facts")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Keep")).to_be_focused()
    page.keyboard.press("Escape")  # the question closes and nothing is deleted
    expect(page.get_by_role("button", name="Delete 2 facts")).to_be_focused()
    expect(page.locator("#memory-bulk-confirm")).to_be_hidden()
    assert len(stored()) == 3
    page.keyboard.press("Enter")
    page.keyboard.press("Shift+Tab")
    expect(page.locator("#memory-bulk-delete")).to_be_focused()
    page.keyboard.press("Enter")

    expect(page.locator("#memory-add-message")).to_have_text("2 facts deleted. They no longer reach the model.")
    # Nothing left matches "drop": the focus waits in the filter, where Escape shows the rest.
    expect(page.get_by_role("searchbox", name="Filter facts")).to_be_focused()
    expect(page.locator("#memory-no-match")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#memory-list .fact:visible .fact-text")).to_have_text(["Keep this one."])
    assert stored() == [{"content": "Keep this one.", "version": 1}]


def test_the_section_fits_375_px(settings_page: Page) -> None:
    services.fact_create(content="A fact with a very long unbroken word: " + "x" * 300)
    services.fact_create(content="Short fact.")
    page = settings_page
    page.set_viewport_size({"width": 375, "height": 800})
    reload(page)
    long_fact = item(page, "unbroken word")
    long_fact.get_by_role("button", name="Edit").click()
    item(page, "Short fact.").get_by_role("button", name="Delete").click()

    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] == 375
    for button in page.locator("#memory button:visible").all():
        box = button.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= 375
    page.locator("#memory").scroll_into_view_if_needed()
    screenshot(page, "memory-375")


# --- at 200 facts: light rows, a filter, a selection deleted at once ----------------------

LONG = "A long fact that goes on. " * 30  # 780 characters: more than two lines at any width


def two_hundred_facts() -> None:
    Fact.objects.bulk_create(
        Fact(content=LONG + str(i) if i % 20 == 0 else f"Fact number {i}: short.") for i in range(services.MAX_FACTS)
    )


@pytest.mark.parametrize("look", LOOKS)
def test_200_facts_are_light_rows_in_a_list_that_scrolls_inside_the_section(
    settings_page: Page, look: tuple[int, str]
) -> None:
    two_hundred_facts()
    page = settings_page
    apply_look(page, look)
    reload(page)
    assert_scheme(page, look)
    expect(page.locator("#memory-count")).to_have_text("200 of 200 facts")
    expect(facts_listed(page)).to_have_count(200)

    # The list is a box that scrolls, and the section stays about a screen tall (it was 24,500 px).
    sizes = page.evaluate(
        """() => {
            const list = document.getElementById("memory-list");
            return {section: document.getElementById("memory").offsetHeight, box: list.clientHeight,
                    content: list.scrollHeight, rows: Array.from(list.children, (row) => row.offsetHeight),
                    nodes: list.getElementsByTagName("*").length, fields: list.querySelectorAll("textarea").length,
                    page: document.documentElement.scrollHeight};
        }"""
    )
    assert sizes["content"] > sizes["box"] * 5, sizes  # everything is there, scrolled inside the box
    assert sizes["box"] <= 0.7 * 800 + 2, sizes
    assert sizes["section"] < 1_300, sizes
    # Two lines of text at most, beside the date and buttons (under them on a narrow screen).
    assert max(sizes["rows"]) <= (80 if look[0] > 720 else 110), max(sizes["rows"])
    assert sizes["nodes"] <= 12 * 200, sizes["nodes"]  # no per-fact edit form until one is opened
    assert sizes["fields"] == 0

    # A long fact is clamped to two lines, with a way to read all of it; a short one is whole.
    long_fact, short_fact = item(page, "A long fact").first, item(page, "Fact number 1: short.")
    expect(long_fact.get_by_role("button", name="Show all")).to_be_visible()
    expect(short_fact.get_by_role("button", name="Show all")).to_be_hidden()
    text = long_fact.locator(".fact-text")
    assert text.evaluate("(p) => p.scrollHeight > p.clientHeight + 1")
    long_fact.get_by_role("button", name="Show all").click()
    expect(long_fact.get_by_role("button", name="Show less")).to_have_attribute("aria-expanded", "true")
    assert text.evaluate("(p) => p.scrollHeight <= p.clientHeight + 1")
    expect(text).to_have_text(re.compile(rf"^{re.escape(LONG)}\d+$"))

    # Edit opens a form in the row (made then), Cancel takes it away again.
    short_fact.get_by_role("button", name="Edit").click()
    expect(short_fact.get_by_label("Edit fact")).to_have_value("Fact number 1: short.")
    no_sideways_scroll(page, look[0])
    short_fact.get_by_role("button", name="Cancel").click()
    expect(page.locator("#memory-list textarea")).to_have_count(0)
    page.locator("#memory").scroll_into_view_if_needed()
    screenshot(page, f"memory-200-{look[0]}-{look[1]}")


FILTER_FACTS = ["Prefers green tea.", "Drinks coffee at 8.", "Lives in Lisbon.", "Café on Rua Augusta, Lisbon."]


@pytest.mark.parametrize("look", ONE_MESSAGE_LOOKS)
def test_the_filter_narrows_the_list_as_the_owner_types_and_escape_clears_it(
    settings_page: Page, look: tuple[int, str]
) -> None:
    for text in FILTER_FACTS:
        services.fact_create(content=text)
    page = settings_page
    apply_look(page, look)
    reload(page)
    box = page.get_by_role("searchbox", name="Filter facts")
    expect(page.locator("#memory-shown")).to_be_hidden()

    box.press_sequentially("lis")
    expect(page.locator("#memory-list .fact:visible .fact-text")).to_have_text(
        ["Café on Rua Augusta, Lisbon.", "Lives in Lisbon."]
    )
    expect(page.locator("#memory-shown")).to_have_text("2 of 4 facts")
    box.press_sequentially("bon cafe")  # every word must occur; case and accents do not matter
    expect(page.locator("#memory-list .fact:visible .fact-text")).to_have_text(["Café on Rua Augusta, Lisbon."])
    expect(page.locator("#memory-shown")).to_have_text("1 of 4 facts")
    no_sideways_scroll(page, look[0])
    screenshot(page, f"memory-filter-{look[0]}-{look[1]}")

    box.press_sequentially(" tea")
    expect(page.locator("#memory-list .fact:visible")).to_have_count(0)
    expect(page.locator("#memory-shown")).to_have_text("0 of 4 facts")
    expect(page.locator("#memory-no-match")).to_have_text(
        "No fact matches “lisbon cafe tea”. Press Escape to clear the filter."
    )

    box.press("Escape")

    expect(box).to_have_value("")
    expect(page.locator("#memory-list .fact:visible")).to_have_count(4)
    expect(page.locator("#memory-shown")).to_be_hidden()
    expect(page.locator("#memory-no-match")).to_be_hidden()


@pytest.mark.parametrize("look", ONE_MESSAGE_LOOKS)
def test_select_all_shown_then_delete_them_in_one_call_after_confirming(
    settings_page: Page, dialogs: Dialogs, look: tuple[int, str]
) -> None:
    for text in (
        "Keep: lives in Lisbon.",
        "Old: likes tea.",
        "Keep: has a cat.",
        "Old: drinks coffee.",
        "Old: 2019 job.",
    ):
        services.fact_create(content=text)
    page = settings_page
    apply_look(page, look)
    reload(page)
    calls: list[str] = []
    page.on("request", lambda request: calls.append(f"{request.method} {request.url.split('/api/')[-1]}"))
    page.get_by_role("searchbox", name="Filter facts").fill("old")
    select_all = page.get_by_role("checkbox", name="Select all shown")

    select_all.check()

    expect(page.locator("#memory-selected")).to_have_text("3 selected")
    expect(page.locator("#memory-list .fact:visible .fact-check:checked")).to_have_count(3)
    delete = page.get_by_role("button", name="Delete 3 facts")
    delete.click()
    question = page.get_by_role("group", name="Confirm deleting the selected facts")
    expect(question).to_contain_text("Delete 3 facts? They will no longer reach the model")
    no_sideways_scroll(page, look[0])
    screenshot(page, f"memory-delete-selected-{look[0]}-{look[1]}")

    question.get_by_role("button", name="Keep").click()  # cancel: nothing changes

    expect(question).to_be_hidden()
    expect(delete).to_be_focused()
    expect(page.locator("#memory-selected")).to_have_text("3 selected")
    assert len(stored()) == 5
    # (The Tasks section marks runs seen when it shows: not a change of memory.)
    assert [call for call in calls if call.startswith(("POST memories", "DELETE memories"))] == []

    delete.click()
    question.get_by_role("button", name="Delete 3 facts").click()

    expect(page.locator("#memory-add-message")).to_have_text("3 facts deleted. They no longer reach the model.")
    expect(page.locator("#memory-count")).to_have_text("2 of 200 facts")
    expect(page.locator("#memory-selected")).to_have_text("None selected")
    page.get_by_role("searchbox", name="Filter facts").press("Escape")
    expect(page.locator("#memory-list .fact-text")).to_have_text(["Keep: has a cat.", "Keep: lives in Lisbon."])
    assert sorted(f["content"] for f in stored()) == ["Keep: has a cat.", "Keep: lives in Lisbon."]
    assert [call for call in calls if call.startswith(("POST memories", "DELETE memories"))] == [
        "POST memories/delete/"
    ]
    assert dialogs == []  # an inline question, not a browser dialog


def test_a_fact_changed_elsewhere_stays_selected_with_its_new_text_while_the_others_go(settings_page: Page) -> None:
    rows = [services.fact_create(content=text) for text in ("Old: likes tea.", "Old: drinks coffee.", "Keep me.")]
    page = settings_page
    reload(page)
    for text in ("Old: likes tea.", "Old: drinks coffee."):
        item(page, text).get_by_role("checkbox").check()
    expect(page.locator("#memory-selected")).to_have_text("2 selected")
    services.fact_update(fact_id=rows[0].id, content="Likes tea after all.", version=1)  # elsewhere

    page.get_by_role("button", name="Delete 2 facts").click()
    page.get_by_role("group", name="Confirm deleting the selected facts").get_by_role(
        "button", name="Delete 2 facts"
    ).click()

    expect(page.locator("#memory-add-message")).to_have_text(
        "1 fact deleted. Not deleted: 1 fact changed elsewhere, shown with the current text and still selected."
    )
    kept = item(page, "Likes tea after all.")
    expect(kept.locator("[data-role=message]")).to_contain_text("Not deleted: this fact was changed elsewhere")
    expect(kept.get_by_role("checkbox")).to_be_checked()
    expect(page.locator("#memory-selected")).to_have_text("1 selected")
    expect(page.locator("#memory-list .fact-text")).to_have_text(["Keep me.", "Likes tea after all."])
    assert sorted(f["content"] for f in stored()) == ["Keep me.", "Likes tea after all."]


def test_a_selection_the_filter_hides_is_counted_and_named_before_deleting(settings_page: Page) -> None:
    for text in FILTER_FACTS:
        services.fact_create(content=text)
    page = settings_page
    reload(page)
    item(page, "Prefers green tea.").get_by_role("checkbox").check()
    box = page.get_by_role("searchbox", name="Filter facts")

    box.fill("lisbon")
    page.get_by_role("checkbox", name="Select all shown").check()

    expect(page.locator("#memory-selected")).to_have_text("3 selected (1 not shown)")
    page.get_by_role("button", name="Delete 3 facts").click()
    expect(page.locator("#memory-bulk-question")).to_contain_text("1 of them is not shown by the filter.")
    page.get_by_role("group", name="Confirm deleting the selected facts").get_by_role(
        "button", name="Delete 3 facts"
    ).click()
    expect(page.locator("#memory-add-message")).to_have_text("3 facts deleted. They no longer reach the model.")
    assert stored() == [{"content": "Drinks coffee at 8.", "version": 1}]


def test_select_all_shown_toggles_back_and_a_changed_selection_withdraws_the_question(settings_page: Page) -> None:
    for text in FILTER_FACTS:
        services.fact_create(content=text)
    page = settings_page
    reload(page)
    select_all = page.get_by_role("checkbox", name="Select all shown")
    item(page, "Lives in Lisbon.").get_by_role("checkbox").check()
    assert select_all.evaluate("(box) => box.indeterminate")

    select_all.click()
    expect(page.locator("#memory-selected")).to_have_text("4 selected")
    page.get_by_role("button", name="Delete 4 facts").click()
    item(page, "Lives in Lisbon.").get_by_role("checkbox").uncheck()

    expect(page.get_by_role("group", name="Confirm deleting the selected facts")).to_be_hidden()
    expect(page.get_by_role("button", name="Delete 3 facts")).to_be_visible()
    select_all.click()  # some were selected: now all are
    expect(page.locator("#memory-selected")).to_have_text("4 selected")
    select_all.click()  # all were: now none
    expect(page.locator("#memory-selected")).to_have_text("None selected")
    expect(page.get_by_role("button", name="Delete selected")).to_be_disabled()
    assert len(stored()) == 4
