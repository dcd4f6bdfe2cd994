"""Helpers of the chat page's browser tests: the owner over HTTP beside the browser, and page steps.

The browser is the owner's; `live_owner` is a second, independent session of the same
owner over plain HTTP, used to prepare state (a provider key) and to check what the server
holds after the page acted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from conversations.models import Message, MessageRole
from tests.support.fake_providers import Step, Text
from tests.support.live_clients import OwnerClient


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


# A deletion is sent once its Undo has had its time (`UNDO_MS` in chat-ask.js), or when
# the page is left. Tests that wait for it move the page's clock (`page.clock.install()`
# before the page loads) instead of waiting ten seconds.
UNDO_MS = 10_000


def conversation_ids_eventually(live_owner: OwnerClient, expected: list[str]) -> None:
    """Wait until the server lists exactly these conversations (a deletion goes out as a request of its own)."""
    deadline = time.monotonic() + 15
    while (listed := [c["id"] for c in conversations(live_owner)]) != expected:
        assert time.monotonic() < deadline, f"the server still lists {listed}, not {expected}"
        time.sleep(0.2)


def undo_runs_out(page: Page, live_owner: OwnerClient, expected: list[str]) -> None:
    """Move the page's clock past every Undo's time, then wait until the server lists exactly these."""
    page.clock.fast_forward(UNDO_MS)
    conversation_ids_eventually(live_owner, expected)


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


def engine_call_id_of(page: Page, provider_id: str, *, timeout_ms: int | None = None) -> str:
    """Wait until the call the model server sent as `provider_id` is stored, and return the engine's id of it.

    The engine names every call itself (`engine_call_id`: turn, step and index) and keeps the
    server's id in the call's tool part only to answer the server; cards, activities and
    events carry the engine's. The part is stored in the same transaction as the call's
    first events, before any of them is published, so it is there before its card is.
    """
    from tests.e2e.conftest import STEP_TIMEOUT_MS, until  # at call time: conftest imports this module

    found: list[str] = []

    def stored() -> bool:
        found[:] = [
            part["tool_call_id"]
            for parts in Message.objects.filter(role=MessageRole.ASSISTANT).values_list("parts", flat=True)
            for part in parts
            if part.get("type") == "tool" and part.get("provider_call_id") == provider_id
        ]
        return bool(found)

    until(page, stored, f"a stored part of the call {provider_id!r}", timeout_ms=timeout_ms or STEP_TIMEOUT_MS)
    assert len(found) == 1, f"the call {provider_id!r} is stored as {found}"
    return found[0]


def tool_card(page: Page, provider_id: str, *, timeout_ms: int | None = None) -> Locator:
    """The card of the call the model server sent as `provider_id`, once the call is stored (`engine_call_id_of`)."""
    call_id = engine_call_id_of(page, provider_id, timeout_ms=timeout_ms)
    return page.locator(f'.tool-card[data-tool-call-id="{call_id}"]')


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


# The four ways the page is checked: both widths, both colour schemes.
LOOKS = [
    pytest.param((width, scheme), id=f"{scheme}-{width}px") for width in (1280, 375) for scheme in ("light", "dark")
]
# The page's own background in each scheme (base.css): proof that the scheme took effect.
BACKGROUNDS = {"light": "rgb(255, 255, 255)", "dark": "rgb(20, 20, 23)"}


def apply_look(page: Page, look: tuple[int, str]) -> None:
    """Show the page at a width and in a colour scheme."""
    width, scheme = look
    page.set_viewport_size({"width": width, "height": 800})
    page.emulate_media(color_scheme=scheme)  # type: ignore[arg-type]


def assert_scheme(page: Page, look: tuple[int, str]) -> None:
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == BACKGROUNDS[look[1]]


def open_sidebar(page: Page, look: tuple[int, str]) -> None:
    """On a narrow screen the sidebar is behind its toggle."""
    if look[0] < 760:
        page.get_by_role("button", name="Show conversations").click()
        expect(page.locator("#sidebar")).to_have_css("transform", "none")


def clipboard(page: Page) -> str:
    """What the page put on the clipboard (the context was granted reading it)."""
    return str(page.evaluate("navigator.clipboard.readText()"))


def no_sideways_scroll(page: Page) -> None:
    """Nothing of the page scrolls sideways: wide tables and code scroll inside themselves."""
    widths = page.evaluate(
        """() => {
            const t = document.getElementById("transcript");
            return [document.documentElement.scrollWidth - document.documentElement.clientWidth,
                    t.scrollWidth - t.clientWidth];
        }"""
    )
    assert widths == [0, 0], widths
