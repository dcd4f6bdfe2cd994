"""The installable web app in real Chromium, at 1280 and 375 pixels: the manifest and the
service worker load, an offline reload shows the shell, and API answers never come from it.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.chat_support import forgive, open_conversation
from tests.e2e.conftest import PageErrors, screenshot
from tests.support.live_clients import OwnerClient

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


def controlled(page: Page) -> None:
    """Wait until the service worker is active and controls this page."""
    page.evaluate("navigator.serviceWorker.ready.then(() => true)")
    page.wait_for_function("navigator.serviceWorker.controller !== null")


@pytest.mark.parametrize("width", [1280, 375])
def test_the_app_installs_and_an_offline_reload_shows_the_shell(
    chat_page: Page, context: BrowserContext, live_owner: OwnerClient, page_errors: PageErrors, width: int
) -> None:
    page = chat_page
    page.set_viewport_size({"width": width, "height": 800})
    conversation = live_owner.create_conversation("Packing list")
    open_conversation(page, conversation)

    manifest = page.evaluate(
        """async () => {
            const link = document.querySelector('link[rel="manifest"]');
            const manifest = await (await fetch(link.href)).json();
            const sizes = [];
            for (const icon of manifest.icons) {
                const image = new Image();
                image.src = icon.src;
                await image.decode();
                sizes.push(`${image.naturalWidth}x${image.naturalHeight}`);
            }
            return { name: manifest.name, display: manifest.display, start: manifest.start_url, sizes };
        }"""
    )
    assert manifest == {
        "name": "Flarebot",
        "display": "standalone",
        "start": "/",
        "sizes": ["192x192", "512x512", "192x192", "512x512"],
    }
    controlled(page)
    assert page.evaluate("navigator.serviceWorker.controller.scriptURL").endswith("/sw.js")

    context.set_offline(True)
    try:
        page.reload()
        expect(page.get_by_role("heading", name="You are offline")).to_be_visible()
        expect(page).to_have_title("Offline · Flarebot")
        expect(page.locator(".offline-bar .brand")).to_have_text("Flarebot")
        # The shell's own assets came from the worker's copy: styled, with its icon.
        assert page.evaluate("document.querySelector('.offline-main img').naturalWidth") == 192
        assert page.evaluate("getComputedStyle(document.querySelector('.offline-main')).display") == "flex"
        screenshot(page, f"offline-{width}")
        # API answers are never kept: offline, the API is simply unreachable.
        outcome = page.evaluate("fetch('/api/conversations/').then(r => `answered ${r.status}`, () => 'unreachable')")
        assert outcome == "unreachable"
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        retry = page.get_by_role("link", name="Try again")
        expect(retry).to_have_attribute("href", f"/?c={conversation}")
    finally:
        context.set_offline(False)
    forgive(page_errors, "ERR_INTERNET_DISCONNECTED", "Failed to fetch", "Failed to load resource")

    # Back online, the shell returns to the page the owner wanted by itself (it asks every few seconds).
    view = page.locator(f'#transcript .transcript-view[data-conversation-id="{conversation}"]')
    expect(view).to_be_attached()
    expect(page).to_have_title("Packing list · Flarebot")
