"""The System section of /settings/, in Chromium, against the live stack's real processes."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from flarebot.core.models import Installation
from tests.e2e.conftest import screenshot
from tests.e2e.settings_support import settings_sign_in
from tests.support.live import LiveStack

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

WAIT_MS = 60_000
NO_DOCKER = "unix:///nonexistent/flarebot-test/docker.sock"


def row(page: Page, name: str):
    return page.locator(f'#system-list .system-row[data-component="{name}"]')


def test_it_shows_what_runs_here_and_how_to_add_what_is_missing(page: Page, owner: Installation) -> None:
    settings_sign_in(page)
    page.get_by_role("link", name="System").click()

    # The live stack's worker and scheduler report in within seconds; "Check again" asks anew.
    try:
        page.wait_for_function(
            "() => ['workers', 'beat', 'chromium'].every((n) =>"
            " document.querySelector(`#system-list [data-component=${n}]`)?.dataset.state === 'ok')"
            " || (document.querySelector('#system-reload').click(), false)",
            polling=1000,
            timeout=WAIT_MS,
        )
    except PlaywrightTimeout:
        raise AssertionError(f"not all found in {WAIT_MS} ms: {page.locator('#system-list').inner_text()}") from None
    expect(row(page, "database")).to_have_attribute("data-state", "ok")
    expect(row(page, "broker")).to_have_attribute("data-state", "ok")
    expect(row(page, "chromium").locator(".system-detail")).to_have_text(re.compile(r"chromium"))
    openai = row(page, "openai_key")
    expect(openai).to_have_attribute("data-state", "missing")
    expect(openai.locator(".badge")).to_have_text("Missing")
    expect(openai.locator(".system-fix")).to_have_text("Add one in Settings, under Model.")
    expect(row(page, "workers").locator(".system-fix")).to_have_count(0)


def test_it_fits_a_375_pixel_screen(page: Page, owner: Installation) -> None:
    page.set_viewport_size({"width": 375, "height": 800})
    settings_sign_in(page)
    section = page.locator("#system")
    section.scroll_into_view_if_needed()
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 375
    for item in section.locator(".system-row").all():
        box = item.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= 375


@pytest.mark.parametrize("width", [1280, 375])
def test_after_a_restart_it_counts_only_live_workers_and_never_shows_what_stopped_ones_found(
    page: Page, owner: Installation, live_stack: LiveStack, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    settings_sign_in(page)
    normal = dict(live_stack.stack.env)
    live_stack.stack.env = {**normal, "FLAREBOT_CHROMIUM": "/nonexistent/chromium", "DOCKER_HOST": NO_DOCKER}
    live_stack.restart("worker")
    try:
        page.goto("/settings/#system")
        expect(page.locator("body")).to_have_attribute("data-ready", "1")
        # From the first look on, nothing a stopped worker had found is shown, and only the
        # restarted worker is counted, until it reports what it finds here.
        seen: list[tuple[str, str | None, str | None]] = []
        deadline = time.monotonic() + WAIT_MS / 1000
        while time.monotonic() < deadline:
            workers = row(page, "workers").locator(".system-detail").inner_text()
            states = (
                row(page, "chromium").get_attribute("data-state"),
                row(page, "docker").get_attribute("data-state"),
            )
            seen.append((workers, *states))
            assert not workers.startswith(("2 processes", "3 processes")), seen
            assert "ok" not in states, seen
            if workers.startswith("1 process, ") and states == ("missing", "missing"):
                break
            page.locator("#system-reload").click()
            page.wait_for_timeout(500)
        else:
            raise AssertionError(f"the restarted worker never reported: {seen}")
        expect(row(page, "docker").locator(".system-detail")).to_have_text(f"No Docker engine answers at {NO_DOCKER}.")
        screenshot(page, f"system-after-restart-{width}")
    finally:
        live_stack.stack.env = normal
        live_stack.restart("worker")
