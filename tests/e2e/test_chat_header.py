"""Control from the chat page in real Chromium, at 1280 and 375 pixels, light and dark: the
model in the header (the same setting as /settings/), what a new owner must configure
first, the way back to the bottom while an answer streams, and Ctrl+Shift+O for a new chat.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from conversations.models import ProviderKey
from tests.e2e.chat_support import (
    LOOKS,
    apply_look,
    assert_scheme,
    last_answer,
    no_sideways_scroll,
    open_conversation,
    paced,
    send,
)
from tests.e2e.conftest import screenshot
from tests.support.fake_providers import FakeProviders
from tests.support.live_clients import OwnerClient

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

AT_BOTTOM = (
    "(() => { const t = document.getElementById('transcript');"
    " return t.scrollHeight - t.scrollTop - t.clientHeight < 48; })()"
)


def model_setting(live_owner: OwnerClient) -> dict[str, str]:
    response = live_owner.api("GET", "/api/settings/model/")
    assert response.status_code == 200, response.text
    configuration = response.json()["configuration"]
    assert configuration["available"] is True
    return {"provider": configuration["provider"], "model": configuration["model"]}


@pytest.mark.parametrize("look", LOOKS)
def test_it_shows_and_switches_the_model_in_the_header_as_settings_does(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, look: tuple[int, str]
) -> None:
    page = chat_page
    apply_look(page, look)
    catalog = live_owner.api("GET", "/api/settings/model/catalog/").json()["providers"]
    before = model_setting(live_owner)
    page.goto("/")
    assert_scheme(page, look)
    switch = page.get_by_role("combobox", name="Model")
    expect(switch).to_be_visible()
    expect(switch).to_have_value(json.dumps([before["provider"], before["model"]], separators=(",", ":")))
    other = next(m for m in catalog["anthropic"] if m != before["model"])

    switch.select_option(json.dumps(["anthropic", other], separators=(",", ":")))

    page.wait_for_function("() => !document.getElementById('model-switch').disabled")
    assert model_setting(live_owner) == {"provider": "anthropic", "model": other}
    # An OpenAI model without its key: saved, and the page says what is missing.
    switch.select_option(json.dumps(["openai", catalog["openai"][0]], separators=(",", ":")))
    expect(page.locator("#notice")).to_contain_text("needs an OpenAI API key")
    assert model_setting(live_owner) == {"provider": "openai", "model": catalog["openai"][0]}
    no_sideways_scroll(page)
    screenshot(page, f"chat-model-{look[1]}-{look[0]}")

    page.goto("/settings/")
    expect(page.locator("#provider")).to_have_value("openai")
    expect(page.locator("#model-select")).to_have_value(catalog["openai"][0])


@pytest.mark.parametrize("look", LOOKS)
def test_it_tells_a_new_owner_what_to_configure_before_the_first_message(
    chat_page: Page, live_owner: OwnerClient, look: tuple[int, str]
) -> None:
    page = chat_page
    apply_look(page, look)
    page.goto("/")
    assert_scheme(page, look)
    setup = page.locator("#setup")
    expect(setup).to_contain_text("Add an Anthropic or OpenAI API key in Settings")
    expect(setup.get_by_role("link", name="Open Settings")).to_have_attribute("href", "/settings/")
    no_sideways_scroll(page)
    screenshot(page, f"chat-setup-{look[1]}-{look[0]}")

    live_owner.set_provider_key("openai", "sk-" + "o" * 40)
    page.reload()
    expect(page.get_by_role("combobox", name="Model")).to_be_visible()
    # A key exists, but not for the chosen (Anthropic) model: the hint names what is missing.
    expect(setup).to_contain_text("needs an Anthropic API key")
    live_owner.set_provider_key("anthropic", "sk-ant-api03-" + "a" * 40)
    page.reload()
    expect(page.get_by_role("combobox", name="Model")).to_be_visible()
    expect(setup).to_be_hidden()


def test_a_key_that_no_longer_opens_is_named_in_chat_before_the_first_message(
    chat_page: Page, live_owner: OwnerClient
) -> None:
    live_owner.set_provider_key("anthropic", "sk-ant-api03-" + "a" * 40)
    ProviderKey.objects.filter(provider="anthropic").update(sealed=b"\x00" * 64)  # what a changed secret sees
    page = chat_page
    page.goto("/")

    expect(page.locator("#setup")).to_contain_text(
        "The stored Anthropic key can no longer be read (the server secret or the installation changed); "
        "enter it again in Settings."
    )
    expect(page.get_by_role("combobox", name="Model")).to_contain_text("(key unreadable)")


@pytest.mark.parametrize("look", LOOKS)
def test_it_offers_the_way_back_down_while_an_answer_streams_below_the_fold(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, look: tuple[int, str]
) -> None:
    page = chat_page
    apply_look(page, look)
    fake_providers.script(paced([f"Paragraph {i} of a long answer.\n\n" for i in range(120)], 0.05))
    conversation_id = live_owner.create_conversation("Long")
    open_conversation(page, conversation_id)
    send(page, "Write a long answer.")
    expect(last_answer(page)).to_contain_text("Paragraph 30 ")
    down = page.get_by_role("button", name="Scroll to the latest message")
    expect(down).to_be_hidden()  # following the answer

    page.locator("#transcript").evaluate("(t) => t.scrollTo(0, 0)")
    expect(down).to_be_visible()
    assert page.locator("#stop").is_visible()  # still streaming below the fold
    screenshot(page, f"chat-to-bottom-{look[1]}-{look[0]}")
    if look[1] == "dark":
        # By keyboard: it is the stop just before the composer.
        page.get_by_role("textbox", name="Message").focus()
        page.keyboard.press("Shift+Tab")
        expect(down).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    else:
        down.click()

    expect(down).to_be_hidden()
    assert page.evaluate(AT_BOTTOM)
    expect(last_answer(page)).to_contain_text("Paragraph 119 ")
    page.wait_for_function(AT_BOTTOM)  # it follows the answer again to its end
    expect(down).to_be_hidden()


@pytest.mark.parametrize("look", [LOOKS[0], LOOKS[3]])
def test_it_starts_a_new_chat_with_ctrl_shift_o(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, look: tuple[int, str]
) -> None:
    page = chat_page
    apply_look(page, look)
    conversation_id = live_owner.create_conversation("Old one")
    open_conversation(page, conversation_id)
    page.locator("#transcript").focus()

    page.keyboard.press("Control+Shift+O")

    expect(page).to_have_url(page.url.split("?")[0])
    expect(page.locator("#empty-state")).to_be_visible()
    expect(page.get_by_role("textbox", name="Message")).to_be_focused()
    expect(page.locator("#conversation-title")).to_have_text("Flarebot")
    expect(page.locator("#export")).to_be_hidden()


def test_at_375_pixels_the_title_has_the_first_row_and_markdown_never_shows_in_it(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = chat_page
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto("/")
    expect(page.locator("#composer-input")).to_be_visible()

    send(page, "Here is a summary of my order.\n\n| Name | Qty | Price |\n|---|---|---|\n| Kettle | 1 | 25 |")

    title = page.locator("#conversation-title")
    expect(title).to_have_text("Here is a summary of my order. Name Qty Price Kettle 1 25")
    box = title.bounding_box()
    assert box is not None
    assert box["width"] >= 280  # most of the row: the model and export sit below it
    screenshot(page, "chat-header-title-375")
