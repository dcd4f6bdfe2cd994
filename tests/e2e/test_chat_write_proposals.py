"""A write proposed after reading the web, confirmed or dismissed on its card, in Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from memory.models import Fact
from tests.e2e.chat_support import last_answer, open_conversation, send, tool_card
from tests.e2e.conftest import screenshot
from tests.support.fake_providers import Call, FakeProviders, Text
from tests.support.live_clients import OwnerClient
from tests.support.web_fixtures import FixtureWeb, fixture_web_start

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

TURN_MS = 60_000
FACT = "The owner's favourite food is fish and chips."


@pytest.fixture
def web() -> FixtureWeb:
    server = fixture_web_start()
    server.reset()
    return server


@pytest.mark.parametrize("width", [1280, 375])
def test_the_owner_confirms_a_memory_write_that_a_read_page_may_have_steered(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, web: FixtureWeb, width
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    fake_providers.script(
        [Call("toolu_read", "read_url", {"url": web.url("/article")})],
        [Call("toolu_mem", "remember", {"content": FACT})],
        [Text("I asked you to confirm it.")],
    )
    conversation_id = live_owner.create_conversation("Fish")
    open_conversation(page, conversation_id)

    send(page, "Read the article and remember what I like.")

    card = tool_card(page, "toolu_mem", timeout_ms=TURN_MS)
    proposal = card.locator(".write-proposal")
    expect(proposal.locator(".write-proposal-title")).to_have_text("Remember a new fact", timeout=TURN_MS)
    expect(proposal.locator(".write-proposal-lines li")).to_have_text([FACT])
    expect(proposal.locator(".write-proposal-state")).to_have_text(
        "Waiting for your confirmation: nothing was done yet."
    )
    expect(last_answer(page)).to_contain_text("I asked you to confirm it.")
    assert not Fact.objects.exists()
    screenshot(page, f"write-proposal-{width}")

    proposal.get_by_role("button", name="Confirm").click()

    expect(proposal.locator(".write-proposal-state")).to_have_text("Confirmed: done.")
    expect(proposal.get_by_role("button")).to_have_count(0)
    assert [fact.content for fact in Fact.objects.all()] == [FACT]

    page.reload()
    card = tool_card(page, "toolu_mem")
    again = card.locator(".write-proposal")
    card.locator("summary").click()
    expect(again.locator(".write-proposal-state")).to_have_text("Confirmed: done.")
    expect(again.get_by_role("button")).to_have_count(0)


def test_dismiss_writes_nothing_and_every_tab_hears_it(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, web: FixtureWeb
) -> None:
    page = chat_page
    fake_providers.script(
        [Call("toolu_read", "read_url", {"url": web.url("/article")})],
        [Call("toolu_mem", "remember", {"content": FACT})],
        [Text("Waiting for you.")],
    )
    conversation_id = live_owner.create_conversation("Fish again")
    open_conversation(page, conversation_id)
    send(page, "Read and remember.")
    proposal = tool_card(page, "toolu_mem", timeout_ms=TURN_MS).locator(".write-proposal")
    expect(proposal.get_by_role("button", name="Dismiss")).to_be_visible(timeout=TURN_MS)
    other = page.context.new_page()
    open_conversation(other, conversation_id)
    other_proposal = tool_card(other, "toolu_mem").locator(".write-proposal")
    expect(other_proposal.get_by_role("button", name="Confirm")).to_be_visible()

    proposal.get_by_role("button", name="Dismiss").click()

    expect(proposal.locator(".write-proposal-state")).to_have_text("Dismissed: nothing was done.")
    expect(other_proposal.locator(".write-proposal-state")).to_have_text("Dismissed: nothing was done.")
    expect(other_proposal.get_by_role("button")).to_have_count(0)
    assert not Fact.objects.exists()
    other.close()
