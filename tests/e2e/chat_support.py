"""Helpers of the chat page's browser tests: the owner over HTTP beside the browser, and page steps.

The browser is the owner's; `live_owner` is a second, independent session of the same
owner over plain HTTP, used to prepare state (a provider key) and to check what the server
holds after the page acted.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from flarebot.core.models import Installation
from tests.support.fake_providers import Step, Text
from tests.support.live import LiveStack
from tests.support.live_clients import OwnerClient


@pytest.fixture
def live_owner(live_stack: LiveStack, owner: Installation) -> OwnerClient:
    return OwnerClient.sign_in(live_stack)


@pytest.fixture
def anthropic_key(live_owner: OwnerClient) -> str:
    """A fresh key, set the way the settings page sets it."""
    key = f"sk-ant-api03-{secrets.token_urlsafe(36)}"
    live_owner.set_provider_key("anthropic", key)
    return key


@pytest.fixture
def chat_page(owner_page: Page) -> Iterator[Page]:
    """The signed-in chat page; at the end it waits for the page's requests to finish.

    The database is emptied after each test; a request still running in daphne at that
    moment can deadlock PostgreSQL's TRUNCATE, so the page is left only once it is quiet.
    """
    page = owner_page
    in_flight: set[Any] = set()
    page.on("request", lambda request: in_flight.add(request))
    page.on("requestfinished", lambda request: in_flight.discard(request))
    page.on("requestfailed", lambda request: in_flight.discard(request))
    yield page
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (in_flight or _connecting(page)):
        page.wait_for_timeout(50)
    page.goto("about:blank")


def _connecting(page: Page) -> bool:
    try:
        return bool(page.evaluate("document.getElementById('connection')?.dataset.state === 'connecting'"))
    except Exception:
        return False


def paced(chunks: list[str], delay: float) -> list[Step]:
    return [Text(chunk, delay=delay) for chunk in chunks]


def conversations(live_owner: OwnerClient) -> list[dict[str, Any]]:
    response = live_owner.api("GET", "/api/conversations/")
    assert response.status_code == 200, response.text
    return list(response.json()["conversations"])


def sidebar_names(page: Page) -> Locator:
    return page.locator("#conversation-list .conversation-link")


def open_conversation(page: Page, conversation_id: str) -> None:
    """Open the chat page on one conversation and wait until its transcript is loaded."""
    page.goto(f"/?c={conversation_id}")
    expect(page.locator(f'#conversation-list .conversation[data-conversation-id="{conversation_id}"]')).to_be_attached()
    expect(page.locator(f'#transcript .transcript-view[data-conversation-id="{conversation_id}"]')).to_be_attached()
    expect(page.locator("#connection")).to_have_attribute("data-state", "live")


def send(page: Page, text: str) -> None:
    page.locator("#composer-input").fill(text)
    page.locator("#composer-input").press("Enter")


def answers(page: Page) -> Locator:
    return page.locator("#transcript .msg.assistant")


def last_answer(page: Page) -> Locator:
    return answers(page).last


def forgive(page_errors: list[str], *fragments: str) -> None:
    """Drop console errors a test provoked on purpose (a stopped server refuses connections)."""
    page_errors[:] = [e for e in page_errors if not any(f in e for f in fragments)]


def watch_transcript_for(page: Page, text: str) -> None:
    """Record in `window.__seen` whether `text` ever shows up in the transcript from now on."""
    page.evaluate(
        """(text) => {
            window.__seen = false;
            const transcript = document.getElementById("transcript");
            const check = () => { if (transcript.textContent.includes(text)) window.__seen = true; };
            new MutationObserver(check).observe(transcript, { childList: true, subtree: true, characterData: true });
            check();
        }""",
        text,
    )
