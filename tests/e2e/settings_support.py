"""Fixtures of the pages reached through the settings: the owner signed in to /settings/ under the CSP.

Every signed-in test serves /settings/ with the Content-Security-Policy the app will ship
(`script-src 'self'; style-src 'self'`), so an inline script, style or handler would show
up as a console error and fail the test (see `page_errors` in conftest).
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Dialog, Page, Route, expect

from flarebot.core.models import Installation
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'"


class Dialogs(list[str]):
    """The types of the dialogs the page opened (confirm, beforeunload); accepted unless told."""

    accept = True


def _with_csp(route: Route) -> None:
    response = route.fetch(max_redirects=0)
    route.fulfill(response=response, headers={**response.headers, "content-security-policy": CSP})


@pytest.fixture
def dialogs(page: Page) -> Dialogs:
    seen = Dialogs()

    def answer(dialog: Dialog) -> None:
        seen.append(dialog.type)
        if seen.accept:
            dialog.accept()
        else:
            dialog.dismiss()

    page.on("dialog", answer)
    return seen


@pytest.fixture
def settings_page(page: Page, owner: Installation, dialogs: Dialogs) -> Page:
    """The owner signed in through the real form straight to /settings/, served under the CSP.

    Not `owner_page`: that one lands on the chat page first, which is another page's test.
    """
    page.route("**/settings/", _with_csp)
    return settings_sign_in(page)


def settings_sign_in(page: Page) -> Page:
    """Sign in through the real form with /settings/ as the next page; return once it is ready."""
    page.goto("/login/?next=/settings/")
    page.fill("input[name=username]", OWNER_USERNAME)
    page.fill("input[name=password]", OWNER_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/settings/")
    expect(page.locator("body")).to_have_attribute("data-ready", "1")
    return page


def api_get(page: Page, path: str) -> Any:
    """GET a JSON API path from inside the page, with the owner's session, as the page does."""
    return page.evaluate("async (path) => (await fetch(path)).json()", path)
