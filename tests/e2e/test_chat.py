"""The chat page in real Chromium against the live stack: conversations, streaming, stopping,
reconnecting, errors, tool activity and the narrow layout.

Every wait is a poll with a deadline (Playwright's `expect`); the loopback provider is
scripted to write slowly where a test must see an answer while it is still being written.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.chat_support import (
    anthropic_key,  # noqa: F401 (a fixture)
    answers,
    conversations,
    last_answer,
    live_owner,  # noqa: F401 (a fixture)
    open_conversation,
    paced,
    send,
    sidebar_names,
)
from tests.e2e.conftest import screenshot
from tests.support.fake_providers import FakeProviders, Text
from tests.support.live_clients import OwnerClient, message_text

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def test_it_creates_renames_and_deletes_conversations_as_the_api_sees_them(
    owner_page: Page, live_owner: OwnerClient
) -> None:
    page = owner_page
    older = live_owner.create_conversation("Older one")
    page.goto("/")
    expect(sidebar_names(page)).to_have_text(["Older one"])

    page.get_by_role("button", name="New chat").click()
    expect(sidebar_names(page)).to_have_count(2)
    [created, listed_older] = conversations(live_owner)
    assert (created["name"], listed_older["id"]) == ("New conversation", older)
    expect(sidebar_names(page)).to_have_text(["New conversation", "Older one"])
    expect(page).to_have_url(re.compile(rf"\?c={created['id']}$"))

    page.get_by_role("button", name="Rename New conversation").click()
    field = page.get_by_role("textbox", name="Conversation name")
    field.fill("Trip to Lisbon")
    field.press("Enter")
    expect(sidebar_names(page).first).to_have_text("Trip to Lisbon")
    expect(page.locator("#conversation-title")).to_have_text("Trip to Lisbon")
    assert [c["name"] for c in conversations(live_owner)] == ["Trip to Lisbon", "Older one"]

    page.get_by_role("button", name="Delete Trip to Lisbon").click()
    page.get_by_role("button", name="Cancel").click()
    expect(sidebar_names(page)).to_have_count(2)
    page.get_by_role("button", name="Delete Trip to Lisbon").click()
    page.locator(".confirm-delete").click()
    expect(sidebar_names(page)).to_have_text(["Older one"])
    assert [c["id"] for c in conversations(live_owner)] == [older]
    expect(page).to_have_url(re.compile(rf"\?c={older}$"))
    expect(page.locator("#notice")).to_be_hidden()


def test_it_streams_an_answer_into_the_page_while_the_model_writes_it(
    owner_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders
) -> None:
    page = owner_page
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
    _ = Text
