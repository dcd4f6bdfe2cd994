"""The sources of a turn under its answer: title and host, linking to the final URL in a new tab."""

from __future__ import annotations

import json
import uuid

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from conversations.models import Conversation, Message, MessageRole, Turn, TurnStatus
from tests.e2e.chat_support import apply_look, last_answer, no_sideways_scroll, open_conversation, send, tool_card
from tests.e2e.conftest import screenshot
from tests.support.fake_providers import Call, FakeProviders, Text
from tests.support.live_clients import OwnerClient
from tests.support.web_fixtures import FixtureWeb, fixture_web_start

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def web() -> FixtureWeb:
    server = fixture_web_start()
    server.reset()
    return server


def test_it_lists_the_pages_a_turn_read_under_its_answer(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, web: FixtureWeb
) -> None:
    page = chat_page
    url = web.url("/article")
    fake_providers.script(
        [Call("toolu_read", "read_url", {"url": url})],
        [Text(f"The article is about [fish and chips]({url}).")],
    )
    conversation_id = live_owner.create_conversation("Sources")
    open_conversation(page, conversation_id)

    send(page, "What does the article say?")

    sources = last_answer(page).locator(".sources")
    expect(sources).to_be_visible()
    link = sources.locator("a.source-link")
    expect(link).to_have_count(1)
    expect(link.locator(".source-title")).to_have_text("Café & Bar \u2013 Notes")
    expect(link.locator(".source-host")).to_have_text(f"127.0.0.1:{web.port}")
    expect(link).to_have_attribute("href", url)
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    card = tool_card(page, "toolu_read")
    expect(card.locator(".tool-label")).to_have_text("Reading a page")
    expect(last_answer(page).locator(".md a")).to_have_text("fish and chips")
    expect(page.locator("#stop")).to_be_hidden()
    screenshot(page, "chat-sources")

    page.reload()
    expect(last_answer(page).locator(".sources a.source-link")).to_have_attribute("href", url)


def _seed_turn_with_sources(conversation_id: str, sources: list[dict]) -> None:
    conversation = Conversation.objects.get(id=conversation_id)
    now = timezone.now()
    turn = Turn.objects.create(
        conversation=conversation,
        ordinal=1,
        request_id=uuid.uuid4(),
        status=TurnStatus.COMPLETED,
        started_at=now,
        finished_at=now,
    )
    Message.objects.create(
        conversation=conversation, turn=turn, role=MessageRole.USER, ordinal=2, parts=[{"type": "text", "text": "Q"}]
    )
    output = {"ok": True, "kind": "search", "sources": sources}
    parts = [
        {"type": "tool", "tool_call_id": "c1", "name": "web_search", "input": {"query": "q"}, "output": output},
        {"type": "text", "text": "Here is what I found."},
    ]
    Message.objects.create(conversation=conversation, turn=turn, role=MessageRole.ASSISTANT, ordinal=3, parts=parts)


def test_it_links_only_http_sources_and_shows_titles_as_text(chat_page: Page, live_owner: OwnerClient) -> None:
    page = chat_page
    conversation_id = live_owner.create_conversation("Hostile sources")

    def source(url: str, title: str) -> dict:
        return {"id": "x", "kind": "search", "title": title, "requested_url": url, "final_url": url}

    _seed_turn_with_sources(
        conversation_id,
        [
            source("javascript:alert(1)", "Script"),
            source("data:text/html,<b>hi</b>", "Data"),
            source("https://user:pw@example.org/", "Credentials"),
            source("https://example.org/a", '<img src=x onerror="window.pwned=1">'),
            source("https://example.org/a", "Duplicate"),
            source("https://news.example.com/b", ""),
        ],
    )
    open_conversation(page, conversation_id)

    links = last_answer(page).locator(".sources a.source-link")
    expect(links).to_have_count(2)
    expect(links.nth(0)).to_have_attribute("href", "https://example.org/a")
    expect(links.nth(0).locator(".source-title")).to_have_text('<img src=x onerror="window.pwned=1">')
    expect(links.nth(1).locator(".source-title")).to_have_text("news.example.com")
    assert page.evaluate("window.pwned === undefined")
    assert last_answer(page).locator(".sources img").count() == 0


@pytest.mark.parametrize("width", [pytest.param(width, id=f"{width}px") for width in (1280, 375)])
def test_a_refused_url_card_names_the_rule_and_tells_the_owner_alone_what_to_allow(
    chat_page: Page, live_owner: OwnerClient, anthropic_key: str, fake_providers: FakeProviders, width: int
) -> None:
    # The live stack allowlists 127.0.0.1 with the fixture server's port (tests/settings.py),
    # not port 9: the URL is refused before any connection.
    page = chat_page
    apply_look(page, (width, "light"))
    fake_providers.script(
        [Call("toolu_refused", "read_url", {"url": "http://127.0.0.1:9/"})], [Text("That address is refused.")]
    )
    conversation_id = live_owner.create_conversation("Refused")
    open_conversation(page, conversation_id)

    send(page, "Read my local service on port 9")

    expect(last_answer(page)).to_contain_text("That address is refused.")
    for _ in range(2):  # as the turn showed it, then after a reload
        card = tool_card(page, "toolu_refused")
        expect(card).to_have_attribute("data-status", "failed")
        expect(card.locator(".tool-body")).to_be_hidden()
        expect(card.locator(".tool-reason")).to_have_text(
            "The operator allows this host on another port only; port 9 is not allowed."
            " The URL names a loopback address, which Flarebot may not reach."
        )
        hint = card.locator(".tool-hint")
        expect(hint).to_be_visible()
        expect(hint).to_contain_text("An operator can allow exactly this host and port with")
        expect(hint).to_contain_text("FLAREBOT_NETWORK_ALLOW=127.0.0.1:9 ")
        no_sideways_scroll(page)
        screenshot(page, f"chat-refused-url-{width}")
        page.reload()
        expect(page.locator("#connection")).to_have_attribute("data-state", "live")

    [request] = [r for r in fake_providers.requests if "tool_result" in json.dumps(r.body)]
    [result] = [
        json.loads(block["content"])
        for message in request.body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    assert (result["error"], result["rule"]) == ("refused", "port")
    assert "FLAREBOT_NETWORK_ALLOW" not in json.dumps(request.body)
