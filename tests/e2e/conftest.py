"""Browser tests: Debian's Chromium driven by Playwright against the live stack.

The browser is launched once per run; each test gets a fresh context (no cookies, no
storage) so tests never see each other's state. Every page error or console error fails
the test: a user would see a broken page. Screenshots go to `tests/e2e/artifacts/`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, Route, expect, sync_playwright

from flarebot.core.models import Installation

# The chat page's fixtures, for every browser test of it.
from tests.e2e.chat_support import chat_page  # noqa: F401
from tests.support.live import LiveStack
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("FLAREBOT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]
ARTIFACTS = Path(__file__).parent / "artifacts"
# Every step and every expect waits up to this for the state it needs, and returns as soon
# as it is there: far above what a loaded CI machine takes, so no test depends on its speed.
STEP_TIMEOUT_MS = 30_000
# A page call the server has not answered within this is abandoned (ANSWER_WITHIN_MS, api.js).
ANSWER_WITHIN_MS = 20_000


@pytest.fixture(scope="session", autouse=True)
def orm_beside_playwright() -> Iterator[None]:
    """Allow the ORM calls of browser tests while Playwright's sync API runs its loop here.

    Session-wide from the first browser test on (live tests run last, after every other
    test), through the database flushes of their teardowns; the live stack never gets it.
    """
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture(scope="session", autouse=True)
def patient_expect() -> Iterator[None]:
    """Give each expect the step deadline (STEP_TIMEOUT_MS), not Playwright's 5 s."""
    expect.set_options(timeout=STEP_TIMEOUT_MS)
    yield
    expect.set_options(timeout=5_000)  # Playwright's default


@pytest.fixture(scope="session")
def playwright_instance(django_db_setup: None) -> Iterator[Playwright]:
    # The test database is made before Playwright's loop runs in this thread (and
    # dropped after it stops): Django refuses to touch it from under a running loop.
    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="session")
def browser(playwright_instance: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: scripts/ensure-chromium.sh installs it")
    browser = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


class PageErrors(list[str]):
    """Errors the page reported: uncaught exceptions and console errors."""


@pytest.fixture
def context(browser: Browser, live_stack: LiveStack) -> Iterator[BrowserContext]:
    context = browser.new_context(base_url=live_stack.base_url, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(STEP_TIMEOUT_MS)
    yield context
    context.close()


@pytest.fixture
def page_errors() -> PageErrors:
    return PageErrors()


@pytest.fixture
def page(context: BrowserContext, page_errors: PageErrors) -> Iterator[Page]:
    page = context.new_page()
    page.on("pageerror", lambda error: page_errors.append(f"pageerror: {error}"))
    page.on("console", lambda msg: page_errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    yield page
    assert not [e for e in page_errors if not _expected(e)], page_errors


def _expected(error: str) -> bool:
    """Errors a test provokes on purpose (a dropped socket, a refused save) are not defects."""
    return "WebSocket" in error or "status of 4" in error or "status of 5" in error


def sign_in(page: Page) -> None:
    """Sign in through the real sign-in page, as the owner would."""
    page.goto("/login/")
    page.fill("input[name=username]", OWNER_USERNAME)
    page.fill("input[name=password]", OWNER_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: not url.endswith("/login/"))


@pytest.fixture
def owner_page(page: Page, owner: Installation) -> Page:
    """A page signed in as the owner, on the chat page."""
    sign_in(page)
    return page


def screenshot(page: Page, name: str) -> Path:
    """Save a screenshot as a test artifact and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


class HoldTheFirst:
    """A route handler for a server that hangs once: the first request is never answered, the rest go on."""

    def __init__(self) -> None:
        self.held: list[Route] = []

    def __call__(self, route: Route) -> None:
        if self.held:
            route.continue_()
        else:
            self.held.append(route)


def until(page: Page, condition: Callable[[], bool], what: str, *, timeout_ms: int = STEP_TIMEOUT_MS) -> None:
    """Let the page run until `condition` holds, for at most `timeout_ms`."""
    for _ in range(timeout_ms // 50):
        if condition():
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"{what}: not within {timeout_ms} ms")
