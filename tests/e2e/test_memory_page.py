"""The Memory section of the settings page in Chromium: add, edit, conflicts, delete, limits.

Served under the app's Content-Security-Policy like the rest of the settings page (the
`settings_page` fixture of test_settings.py), at desktop size and at 375 px, by mouse and
by keyboard. Changes made "elsewhere" go through the services while the page is open.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from memory import services
from memory.models import Fact, FactState
from tests.e2e.conftest import screenshot
from tests.e2e.settings_support import Dialogs, api_get, dialogs, patient_expect, settings_page

__all__ = ["dialogs", "patient_expect", "settings_page"]

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


def test_the_count_limit_shows_before_it_is_hit_and_the_add_form_closes_at_200(settings_page: Page) -> None:
    Fact.objects.bulk_create(Fact(content=f"Fact number {i}.") for i in range(199))
    page = settings_page
    reload(page)
    expect(page.locator("#memory-count")).to_have_text("199 of 200 facts")
    expect(page.locator("#memory-full")).to_be_hidden()

    page.get_by_label("New fact").fill("The 200th fact.")
    page.get_by_role("button", name="Add fact").click()

    expect(page.locator("#memory-count")).to_have_text("200 of 200 facts")
    expect(page.locator("#memory-full")).to_have_text("Memory is full: 200 of 200 facts. Delete a fact to add another.")
    expect(page.get_by_label("New fact")).to_be_disabled()
    expect(page.get_by_role("button", name="Add fact")).to_be_disabled()
    screenshot(page, "memory-full")

    facts_listed(page).first.get_by_role("button", name="Delete").click()
    facts_listed(page).first.get_by_role("button", name="Delete fact").click()

    expect(page.locator("#memory-count")).to_have_text("199 of 200 facts")
    expect(page.get_by_label("New fact")).to_be_enabled()
    expect(page.locator("#memory-full")).to_be_hidden()


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

    page.keyboard.press("Tab")  # from the add box: Add fact, Reload, then the fact's Edit
    page.keyboard.press("Tab")
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
