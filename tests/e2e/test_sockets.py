"""The conversation socket's close codes, as a page's JavaScript sees them in Chromium.

A page reads a close code only from a socket the server accepted: a handshake refused
with HTTP 403 reaches it as a bare 1006. The sockets here are opened by JavaScript in a
page of Flarebot's origin (its /status/ page, so that no chat page reacts to the close
and navigates away), with the browser's own cookie and Origin.
"""

from __future__ import annotations

import re
import uuid

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from conversations.models import Conversation
from flarebot.core.models import Installation
from tests.e2e.conftest import STEP_TIMEOUT_MS, sign_in
from tests.support.live import LiveStack
from tests.support.owner import OWNER_PASSWORD

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

NEW_PASSWORD = "a-brand-new-owner-passphrase-51"

# Opens a socket on the page, resolves once it is open (a refused handshake opens too,
# then closes at once) or closed, and keeps a promise of its close code in
# window.socketClosed[path].
OPEN_SOCKET = """
async (path) => {
  window.socketClosed = window.socketClosed || {};
  const socket = new WebSocket(`ws://${location.host}${path}`);
  window.socketClosed[path] = new Promise((resolve) => {
    socket.addEventListener("close", (event) => resolve(event.code));
  });
  await Promise.race([
    new Promise((resolve) => socket.addEventListener("open", resolve)),
    window.socketClosed[path],
    new Promise((resolve) => setTimeout(resolve, WAIT_MS)),
  ]);
  return socket.readyState === WebSocket.OPEN;
}
""".replace("WAIT_MS", str(STEP_TIMEOUT_MS))
# The close code, or null if the socket is still open after a step's timeout.
CLOSE_CODE = """
(path) => Promise.race([
  window.socketClosed[path],
  new Promise((resolve) => setTimeout(() => resolve(null), WAIT_MS)),
])
""".replace("WAIT_MS", str(STEP_TIMEOUT_MS))


def path_of(conversation_id: uuid.UUID) -> str:
    return f"/ws/conversations/{conversation_id}/"


def on_status_page(page: Page) -> Page:
    page.goto("/status/")
    expect(page.locator("body")).to_contain_text("ok")
    return page


@pytest.fixture
def conversation(owner: Installation) -> Conversation:
    return Conversation.objects.create(name="Watched from the page")


def admin_page(context: BrowserContext) -> Page:
    admin = context.new_page()
    admin.goto("/admin/")
    expect(admin.locator("#logout-form")).to_be_attached()
    return admin


def test_an_open_socket_sees_4001_when_its_session_signs_out_in_the_admin(
    owner_page: Page, context: BrowserContext, conversation: Conversation
) -> None:
    page = on_status_page(owner_page)
    path = path_of(conversation.id)
    assert page.evaluate(OPEN_SOCKET, path) is True

    admin = admin_page(context)
    admin.locator("#logout-form button[type=submit]").click()
    expect(admin).to_have_title(re.compile("Logged out"))

    assert page.evaluate(CLOSE_CODE, path) == 4001
    # A socket opened now is refused: the page reads 4001 there too, not a bare 1006.
    page.evaluate(OPEN_SOCKET, path + "?again")
    assert page.evaluate(CLOSE_CODE, path + "?again") == 4001


def test_an_open_socket_sees_4001_when_the_password_is_changed_from_another_session(
    owner_page: Page, browser_context_of_another_session: BrowserContext, conversation: Conversation
) -> None:
    page = on_status_page(owner_page)
    path = path_of(conversation.id)
    assert page.evaluate(OPEN_SOCKET, path) is True

    other = browser_context_of_another_session.new_page()
    other.goto("/settings/#account")  # the one place a password changes (the admin's forms lead here)
    other.locator("#password-current").fill(OWNER_PASSWORD)
    other.locator("#password-new").fill(NEW_PASSWORD)
    other.locator("#password-again").fill(NEW_PASSWORD)
    with other.expect_response(lambda r: r.url.endswith("/api/account/password/")) as changed:
        other.get_by_role("button", name="Change password").click()
    assert changed.value.status == 204

    assert page.evaluate(CLOSE_CODE, path) == 4001


def test_a_refused_socket_tells_the_page_why(owner_page: Page, conversation: Conversation) -> None:
    page = on_status_page(owner_page)
    unknown = path_of(uuid.uuid4())
    Conversation.objects.filter(id=conversation.id).update(state="deleting")
    deleted = path_of(conversation.id)

    for path in (unknown, deleted):
        page.evaluate(OPEN_SOCKET, path)
    codes = {path: page.evaluate(CLOSE_CODE, path) for path in (unknown, deleted)}

    assert codes == {unknown: 4004, deleted: 4004}


@pytest.fixture
def browser_context_of_another_session(browser: Browser, live_stack: LiveStack, owner: Installation):
    """A second browser context (its own cookies) signed in as the owner: another session."""
    other = browser.new_context(base_url=live_stack.base_url)
    other.set_default_timeout(STEP_TIMEOUT_MS)
    signing_in = other.new_page()
    sign_in(signing_in)
    # The chat page it lands on would follow its own socket's 4001 to the sign-in page,
    # racing the password change's new cookie in the shared cookie jar.
    signing_in.close()
    yield other
    other.close()
