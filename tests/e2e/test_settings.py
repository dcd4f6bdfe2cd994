"""The settings page in Chromium: model, provider keys and instructions, at desktop and 375 px.

Every signed-in test serves /settings/ with the Content-Security-Policy the app will ship
(`script-src 'self'; style-src 'self'`), so an inline script, style or handler would show
up as a console error and fail the test (see `page_errors` in conftest).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import Page, Response, expect

from conversations import instructions, model_settings
from conversations.models import ModelConfiguration, ProviderKey
from conversations.providers.catalog import ANTHROPIC_MODELS, OPENAI_MODELS
from flarebot.core.models import Installation
from tests.e2e.conftest import ANSWER_WITHIN_MS, HoldTheFirst, screenshot, until
from tests.e2e.settings_support import Dialogs, api_get, dialogs, settings_page
from tests.support.fake_providers import FakeProviders
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME
from tests.support.resources import free_port

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

__all__ = ["dialogs", "settings_page"]

KEY = "sk-ant-e2e-secret-" + "Q7x" * 10
LIMIT = 16_000


@pytest.fixture(autouse=True)
def providers_answer(fake_providers: FakeProviders) -> FakeProviders:
    """Saving a key asks the provider: the loopback one answers (a test says which keys it refuses)."""
    return fake_providers


def key_form(page: Page, provider: str) -> Any:
    return page.locator(f".key-form[data-provider={provider}]")


@pytest.fixture
def response_bodies(page: Page) -> list[str]:
    """The bodies of every response the page received (documents, scripts, API calls)."""
    bodies: list[str] = []

    def keep(response: Response) -> None:
        if 300 <= response.status < 400:
            return  # a redirect has no body
        bodies.append(response.body().decode("utf-8", "replace"))

    page.on("response", keep)
    return bodies


def test_signed_out_visitor_is_sent_to_sign_in_and_back(page: Page, owner: Installation) -> None:
    page.goto("/settings/")

    url = urlparse(page.url)
    assert url.path == "/login/"
    assert parse_qs(url.query) == {"next": ["/settings/"]}
    page.fill("input[name=username]", OWNER_USERNAME)
    page.fill("input[name=password]", OWNER_PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("#model-heading")).to_be_visible()
    assert urlparse(page.url).path == "/settings/"


def test_owner_chooses_a_model_and_it_survives_a_reload(settings_page: Page) -> None:
    page = settings_page
    provider, model = page.locator("#provider"), page.locator("#model-select")
    expect(provider).to_have_value("anthropic")
    expect(provider.locator("option")).to_have_text(["Anthropic", "OpenAI"])  # local has no models here
    expect(model.locator("option")).to_have_text(list(ANTHROPIC_MODELS))

    provider.select_option("openai")
    expect(model.locator("option")).to_have_text(list(OPENAI_MODELS))
    expect(page.locator("#model-key-hint")).to_contain_text("Add an OpenAI API key")
    model.select_option(OPENAI_MODELS[1])
    page.get_by_role("button", name="Save model").click()
    expect(page.locator("#model-message")).to_have_text("Saved.")

    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(provider).to_have_value("openai")
    expect(model).to_have_value(OPENAI_MODELS[1])
    chosen = {"provider": "openai", "model": OPENAI_MODELS[1], "available": True}
    assert api_get(page, "/api/settings/model/")["configuration"] == chosen


def test_owner_sets_a_key_that_the_page_never_shows(settings_page: Page, response_bodies: list[str]) -> None:
    page = settings_page
    form = key_form(page, "anthropic")
    expect(form.locator("[data-role=state]")).to_have_text("Missing")
    expect(form.get_by_role("button", name="Remove")).to_be_hidden()

    form.locator("input").fill(KEY)
    form.get_by_role("button", name="Save key").click()

    expect(form.locator("[data-role=state]")).to_have_text("Verified")
    expect(form.locator("[data-role=message]")).to_have_text("Key saved: Anthropic accepted it.")
    expect(form.locator("input")).to_have_value("")
    expect(form.get_by_role("button", name="Remove")).to_be_visible()
    expect(key_form(page, "openai").locator("[data-role=state]")).to_have_text("Missing")
    assert api_get(page, "/api/settings/model/")["credentials"] == {"anthropic": "configured", "openai": "missing"}
    assert KEY not in page.content()

    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(form.locator("[data-role=state]")).to_have_text("Verified")
    expect(form.locator("input")).to_have_value("")
    assert KEY not in page.content()
    assert len(response_bodies) >= 8  # two documents, their assets, the API reads and the save
    assert not [body for body in response_bodies if KEY in body]


def test_owner_removes_a_key(settings_page: Page, dialogs: Dialogs) -> None:
    model_settings.provider_key_set(provider="openai", key=KEY)
    page = settings_page
    page.reload()
    form = key_form(page, "openai")
    expect(form.locator("[data-role=state]")).to_have_text("Verified")

    form.get_by_role("button", name="Remove").click()

    expect(form.locator("[data-role=state]")).to_have_text("Missing")
    expect(form.get_by_role("button", name="Remove")).to_be_hidden()
    assert dialogs == ["confirm"]
    assert api_get(page, "/api/settings/model/")["credentials"]["openai"] == "missing"


@pytest.mark.parametrize(
    "bad_key",
    ["sk-ant-too-short-19", "sk-ant-" + "x" * 506, "sk-ant-with a-space-inside"],
    ids=["19-characters", "513-characters", "with-a-space"],
)
def test_an_invalid_key_shows_why_and_stays_missing(settings_page: Page, bad_key: str) -> None:
    page = settings_page
    form = key_form(page, "anthropic")

    form.locator("input").fill(bad_key)
    form.get_by_role("button", name="Save key").click()

    expect(form.locator("[data-role=message]")).to_have_text(
        "A key is 20-512 printable ASCII characters without spaces."
    )
    expect(form.locator("input")).to_have_value(bad_key)  # kept, not cut to fit
    expect(form.locator("input")).to_have_attribute("aria-invalid", "true")
    expect(form.locator("[data-role=state]")).to_have_text("Missing")
    assert api_get(page, "/api/settings/model/")["credentials"]["anthropic"] == "missing"
    if len(bad_key) == 19:
        screenshot(page, "settings-key-error")


def test_owner_saves_instructions_and_sees_them_after_a_reload(settings_page: Page) -> None:
    page = settings_page
    text = "Answer in English.\n\tBe brief. 🙂"  # the emoji is 2 UTF-16 code units
    textarea = page.locator("#instructions-text")
    expect(textarea).to_have_value(instructions.DEFAULT_INSTRUCTIONS)
    expect(page.locator("#instructions-state")).to_have_text("Default")

    textarea.fill(text)
    expect(page.locator("#instructions-counter")).to_have_text(f"{len(text) + 1} / 16,000")
    page.get_by_role("button", name="Save instructions").click()

    expect(page.locator("#instructions-message")).to_have_text("Saved.")
    expect(page.locator("#instructions-state")).to_have_text("Customized")
    expect(page.locator("#instructions-modified time")).to_have_count(1)
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(textarea).to_have_value(text)
    expect(page.locator("#instructions-state")).to_have_text("Customized")
    saved = api_get(page, "/api/settings/instructions/")
    assert saved["effective"] == text
    assert saved["customized"] is True


@pytest.mark.parametrize(
    ("draft", "why"),
    [
        ("x" * (LIMIT + 1), "at most 16000 characters"),
        ("  \n\t ", "must not be blank"),
        ("ring the \x07 bell", "only tabs and line breaks may be control characters"),
    ],
    ids=["too-long", "blank", "control-character"],
)
def test_a_failed_save_keeps_the_draft_and_says_why(
    settings_page: Page, dialogs: Dialogs, draft: str, why: str
) -> None:
    page = settings_page
    textarea = page.locator("#instructions-text")

    textarea.fill(draft)
    page.get_by_role("button", name="Save instructions").click()

    expect(page.locator("#instructions-message")).to_contain_text(why)
    expect(textarea).to_have_value(draft)
    expect(textarea).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#instructions-state")).to_have_text("Default")
    assert api_get(page, "/api/settings/instructions/")["customized"] is False

    page.reload()  # the draft differs from what is saved: the page asks first
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    assert dialogs == ["beforeunload"]
    expect(textarea).to_have_value(instructions.DEFAULT_INSTRUCTIONS)


def test_the_counter_flags_one_unit_over_and_the_exact_limit_saves(settings_page: Page, dialogs: Dialogs) -> None:
    page = settings_page
    textarea, counter = page.locator("#instructions-text"), page.locator("#instructions-counter")
    at_limit = "😀" * (LIMIT // 2)  # 8,000 characters, 16,000 UTF-16 code units

    textarea.fill(at_limit + "x")
    expect(counter).to_have_text("16,001 / 16,000 (1 over)")
    expect(counter).to_have_attribute("data-over", "1")
    page.get_by_role("button", name="Save instructions").click()
    expect(page.locator("#instructions-message")).to_contain_text("at most 16000 characters")
    expect(textarea).to_have_value(at_limit + "x")

    textarea.fill(at_limit)
    expect(counter).to_have_text("16,000 / 16,000")
    page.get_by_role("button", name="Save instructions").click()
    expect(page.locator("#instructions-message")).to_have_text("Saved.")
    expect(page.locator("#instructions-state")).to_have_text("Customized")
    assert api_get(page, "/api/settings/instructions/")["effective"] == at_limit

    page.reload()  # nothing unsaved: no warning
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(textarea).to_have_value(at_limit)
    assert dialogs == []


def test_reset_brings_back_the_defaults(settings_page: Page, dialogs: Dialogs) -> None:
    instructions.instructions_set(text="Always answer in haiku.")
    page = settings_page
    page.reload()
    textarea = page.locator("#instructions-text")
    expect(textarea).to_have_value("Always answer in haiku.")
    expect(page.locator("#instructions-state")).to_have_text("Customized")

    page.get_by_role("button", name="Reset to defaults").click()

    expect(textarea).to_have_value(instructions.DEFAULT_INSTRUCTIONS)
    expect(page.locator("#instructions-state")).to_have_text("Default")
    expect(page.locator("#instructions-modified")).to_have_text("Shipped defaults")
    assert dialogs == ["confirm"]
    assert api_get(page, "/api/settings/instructions/")["customized"] is False
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    expect(textarea).to_have_value(instructions.DEFAULT_INSTRUCTIONS)


def test_declining_a_confirmation_changes_nothing(settings_page: Page, dialogs: Dialogs) -> None:
    instructions.instructions_set(text="Always answer in haiku.")
    model_settings.provider_key_set(provider="anthropic", key=KEY)
    page = settings_page
    page.reload()
    expect(page.locator("#instructions-state")).to_have_text("Customized")
    dialogs.accept = False

    page.get_by_role("button", name="Reset to defaults").click()
    key_form(page, "anthropic").get_by_role("button", name="Remove").click()

    expect(page.locator("#instructions-text")).to_have_value("Always answer in haiku.")
    expect(page.locator("#instructions-state")).to_have_text("Customized")
    expect(key_form(page, "anthropic").locator("[data-role=state]")).to_have_text("Verified")
    assert dialogs == ["confirm", "confirm"]
    assert api_get(page, "/api/settings/instructions/")["customized"] is True
    assert api_get(page, "/api/settings/model/")["credentials"]["anthropic"] == "configured"


def test_layout_fits_375_px_and_screenshots(settings_page: Page) -> None:
    model_settings.provider_key_set(provider="openai", key=KEY)  # one key of each state on the shots
    page = settings_page
    page.reload()
    expect(page.locator("#instructions-text")).to_be_enabled()
    screenshot(page, "settings")
    page.emulate_media(color_scheme="dark")
    screenshot(page, "settings-dark")
    page.emulate_media(color_scheme="light")

    page.set_viewport_size({"width": 375, "height": 800})
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1] == 375
    for name in ("Save model", "Save instructions", "Reset to defaults", "Sign out"):
        box = page.get_by_role("button", name=name).bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= 375
    screenshot(page, "settings-375")


def test_keyboard_reaches_every_control_in_order(settings_page: Page) -> None:
    page = settings_page
    page.locator("a.back").focus()
    reached: list[str] = []
    for _ in range(20):
        page.keyboard.press("Tab")
        reached.append(page.evaluate("() => document.activeElement.id || document.activeElement.textContent.trim()"))
    expected = ["Sign out", "Model", "provider", "model-select", "model-save", "key-anthropic", "instructions-text"]
    assert set(expected) <= set(reached), reached
    assert reached.index("provider") < reached.index("model-save") < reached.index("key-anthropic")


def test_a_key_the_provider_refuses_is_not_saved_and_the_page_says_so(
    settings_page: Page, fake_providers: FakeProviders
) -> None:
    page = settings_page
    refused = "sk-ant-api03-Refused0000000000000000"
    fake_providers.refused_keys.add(refused)
    form = key_form(page, "anthropic")

    form.locator("input").fill(refused)
    form.get_by_role("button", name="Save key").click()

    expect(form.locator("[data-role=message]")).to_have_text(
        "Anthropic refused this key; it was not saved. Check it and try again."
    )
    expect(form.locator("[data-role=state]")).to_have_text("Missing")
    assert api_get(page, "/api/settings/model/")["credentials"]["anthropic"] == "missing"


def test_a_key_saved_while_the_provider_was_unreachable_shows_as_not_verified(settings_page: Page, settings) -> None:
    settings.CONFIG = dataclasses.replace(settings.CONFIG, openai_base_url=f"http://127.0.0.1:{free_port()}/v1")
    model_settings.provider_key_set(provider="openai", key=KEY)
    page = settings_page
    page.reload()

    form = key_form(page, "openai")
    expect(form.locator("[data-role=state]")).to_have_text("Saved, not checked")
    expect(form.get_by_role("button", name="Remove")).to_be_visible()


@pytest.mark.parametrize("width", [1280, 375])
def test_a_made_up_key_the_provider_could_not_check_is_saved_in_the_neutral_colour_with_the_reason(
    settings_page: Page, fake_providers, width: int
) -> None:
    made_up = "sk-ant-api03-MadeUp00000000000000000000"
    fake_providers.unavailable_keys.add(made_up)
    page = settings_page
    page.set_viewport_size({"width": width, "height": 900})
    form = key_form(page, "anthropic")

    form.locator("input").fill(made_up)
    form.get_by_role("button", name="Save key").click()

    message = form.locator("[data-role=message]")
    expect(message).to_have_text(
        "Saved; not checked: Anthropic is overloaded or having problems (HTTP 503). Try again in a few minutes."
    )
    assert message.get_attribute("data-kind") != "ok"  # not the green of a key the provider accepted
    badge = form.locator("[data-role=state]")
    expect(badge).to_have_text("Saved, not checked")
    assert badge.evaluate("node => getComputedStyle(node).color") != form.page.evaluate(
        "getComputedStyle(document.documentElement).getPropertyValue('--success')"
    )
    screenshot(page, f"settings-key-not-checked-{width}")


def test_a_key_the_provider_accepted_is_said_to_be_accepted(settings_page: Page) -> None:
    page = settings_page
    form = key_form(page, "anthropic")

    form.locator("input").fill("sk-ant-api03-Accepted0000000000000000000")
    form.get_by_role("button", name="Save key").click()

    expect(form.locator("[data-role=message]")).to_have_text("Key saved: Anthropic accepted it.")
    assert form.locator("[data-role=message]").get_attribute("data-kind") == "ok"
    expect(form.locator("[data-role=state]")).to_have_text("Verified")


@pytest.mark.parametrize("width", [1280, 375])
def test_the_rules_flarebot_always_applies_are_shown_under_the_editor_and_survive_custom_instructions(
    settings_page: Page, width: int
) -> None:
    page = settings_page
    page.set_viewport_size({"width": width, "height": 900})
    rules = page.locator("#product-rules")
    expect(rules).to_have_text(instructions.PRODUCT_RULES)
    assert rules.evaluate("node => node.isContentEditable") is False
    assert rules.evaluate("node => node.closest('form') === null")  # nothing submits them

    page.locator("#instructions-text").fill("Only ever answer in haiku.")
    page.get_by_role("button", name="Save instructions").click()
    expect(page.locator("#instructions-message")).to_have_text("Saved.")
    page.reload()

    expect(page.locator("#product-rules")).to_have_text(instructions.PRODUCT_RULES)
    assert "untrusted evidence" in page.locator("#product-rules").inner_text()
    screenshot(page, f"settings-product-rules-{width}")


def test_a_chosen_model_that_left_the_catalog_is_said_to_be_unavailable(settings_page: Page) -> None:
    ModelConfiguration.objects.update_or_create(singleton=True, defaults={"provider": "local", "model": "gone-model"})
    page = settings_page
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "1")

    expect(page.locator("#model-message")).to_have_text(
        "The model gone-model is no longer offered. Choose another and save."
    )
    page.get_by_role("button", name="Save model").click()
    expect(page.locator("#model-message")).to_have_text("Saved.")
    assert api_get(page, "/api/settings/model/")["configuration"]["available"] is True


@pytest.mark.parametrize("width", [1280, 375])
def test_a_key_that_no_longer_opens_says_unreadable_and_asks_for_it_again(settings_page: Page, width: int) -> None:
    model_settings.provider_key_set(provider="anthropic", key=KEY)
    ProviderKey.objects.filter(provider="anthropic").update(sealed=b"\x00" * 64)  # what a changed secret sees
    page = settings_page
    page.set_viewport_size({"width": width, "height": 900})
    page.reload()
    form = key_form(page, "anthropic")

    expect(form.locator("[data-role=state]")).to_have_text("Unreadable")
    expect(form.locator("[data-role=message]")).to_have_text(
        "The stored Anthropic key can no longer be read (the server secret or the installation changed); "
        "enter it again."
    )
    screenshot(page, f"settings-key-unreadable-{width}")

    form.locator("input").fill("sk-ant-api03-Accepted0000000000000000000")
    form.get_by_role("button", name="Save key").click()

    expect(form.locator("[data-role=message]")).to_have_text("Key saved: Anthropic accepted it.")
    expect(form.locator("[data-role=state]")).to_have_text("Verified")


def test_a_call_the_server_never_answers_fails_in_time_with_retry_and_its_late_answer_is_ignored(
    settings_page: Page,
) -> None:
    page = settings_page
    instructions.instructions_set(text="The instructions the server holds now.")
    hang = HoldTheFirst()  # the server "hangs" on this call
    held = hang.held
    page.route("**/api/settings/instructions/", hang)
    in_flight: set[str] = set()
    page.on("request", lambda request: in_flight.add(request.url))
    page.on("requestfinished", lambda request: in_flight.discard(request.url))
    page.clock.install()
    page.reload()

    status = page.locator("#page-status")
    # Once every other call of the page's load has answered (the held one never will),
    # the page's clock is moved to the call's bound instead of waiting 20 s.
    until(
        page,
        lambda: bool(held) and all(url.endswith("/api/settings/instructions/") for url in in_flight),
        "the instructions asked for, every other call answered",
    )
    page.clock.fast_forward(ANSWER_WITHIN_MS)
    expect(status).to_contain_text("The server did not answer within 20 s.")
    retry = page.get_by_role("button", name="Retry")
    expect(retry).to_be_visible()
    expect(page.locator("#model-select")).to_be_enabled()  # what did answer is usable meanwhile
    page.set_viewport_size({"width": 375, "height": 800})
    screenshot(page, "settings-not-answered-375")

    retry.click()

    expect(page.locator("#instructions-text")).to_have_value("The instructions the server holds now.")
    expect(retry).to_be_hidden()
    expect(status).to_be_hidden()
    # The first call's answer arriving now changes nothing: that call was abandoned.
    with contextlib.suppress(Exception):
        held[0].fulfill(
            status=200,
            content_type="application/json",
            body='{"effective": "STALE", "default": "", "customized": true, "modified_at": null, "rules": ""}',
        )
    page.wait_for_timeout(300)
    expect(page.locator("#instructions-text")).to_have_value("The instructions the server holds now.")
