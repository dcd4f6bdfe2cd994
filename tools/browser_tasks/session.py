"""One browser task's Chromium context: opened under a lease, acted on step by step, kept while it waits.

A session lives in the warm browser of its worker process (`tools.web.browser`), with the
same policy proxy, route checks and blocked service workers and downloads as browser_read.
What its pages may send is decided by the task's `RequestGuard` in three places: the
session's own interception of the page (`interception.py`: every request, a redirect's
hops and an unloading page's beacons included), Playwright's route of the context (after
it, and for what it does not reach), and Playwright's WebSocket route (every socket a page
or frame opens). Pop-ups are emptied and refused everything. Its lease row is recorded
before the context opens, with the task's id as `turn_id`; `BrowserPool.close` closes it,
however often asked.

Every action has its own deadline (`ACTION_TIMEOUT`). Actions name elements by the number
the last `observe()` gave them; a page that changed since then is reported, never guessed.
What the owner does through the live view (`input_*`) goes straight to the page and is
never recorded here; it lets what the page sends to the sign-in's site go for a moment
(`guard.OWNER_WINDOW`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from flarebot.core.database import db
from tools.browser_tasks.guard import WEBSOCKET, Decision, RequestGuard
from tools.browser_tasks.inputs import VIEWPORT
from tools.browser_tasks.interception import REFUSALS_KEPT, PageInterception, popup_silence
from tools.browser_tasks.page import (
    ELEMENT_CENTER,
    ELEMENT_FOCUS_EMPTY,
    ELEMENT_FORM,
    ELEMENT_SELECT,
    OBSERVE,
    PAGE_CONTROLS,
    Observation,
    observation_from,
)
from tools.browser_tasks.workers import PAGE_SCRIPT
from tools.network.policy import Refused, url_check
from tools.network.resolver import addresses_checked
from tools.web.browser import CLOSE_TIMEOUT, CallContext, browser_pool
from tools.web.leases import browser_lease_extend, browser_lease_open

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, CDPSession, Page, Route, WebSocketRoute

logger = logging.getLogger(__name__)

ACTION_TIMEOUT = 30.0  # seconds for one action, its page load included
SETTLE = 0.5  # after a click, how long to let the page react before waiting for its load
READ_TIMEOUT = 5.0  # seconds to read a form's fields for an approval question (the question goes without them)
SCROLL_PIXELS = 700
LEASE_TOOL_CALL_ID = "browser_task"
# How long a running task's context lease lasts without a renewal (the task's heartbeat renews it).
RUNNING_LEASE = timedelta(minutes=2)


class ActionFailed(Exception):
    """An action could not be done; `message` is safe for the model and the owner."""

    def __init__(self, message: str) -> None:
        self.message = message[:500]
        super().__init__(self.message)


@dataclass
class BrowserSession:
    """A task's context, page and the numbered elements of its last observation."""

    task_id: uuid.UUID
    conversation_id: uuid.UUID
    lease_id: uuid.UUID
    context: BrowserContext
    page: Page
    cdp: CDPSession
    observation: Observation | None = None
    # What the page may send: held or refused while the task acts, refused between actions.
    guard: RequestGuard = field(default_factory=RequestGuard)
    _world: int | None = None  # the isolated world the last observation numbered elements in
    _refusals: list[str] = field(default_factory=list)

    @property
    def closed(self) -> bool:
        call = browser_pool().calls.get(self.lease_id)
        return call is None or call.closing is not None

    async def observe(self) -> Observation:
        """Read the page (waiting briefly for it to load) and number its elements."""
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        with contextlib.suppress(PlaywrightError):  # a page that never finishes loading is read as it is
            await self.page.wait_for_load_state("load", timeout=ACTION_TIMEOUT * 1000)
        tree = await self.cdp.send("Page.getFrameTree")
        world = await self.cdp.send(
            "Page.createIsolatedWorld", {"frameId": tree["frameTree"]["frame"]["id"], "worldName": "flarebot-task"}
        )
        answer = await self.cdp.send(
            "Runtime.evaluate",
            {"expression": OBSERVE, "contextId": world["executionContextId"], "returnByValue": True},
        )
        observation = observation_from(answer.get("result", {}).get("value"))
        if observation is None:
            raise ActionFailed("The page could not be read.")
        self.observation = observation
        self._world = world["executionContextId"]
        return observation

    async def form_of(self, number: int) -> Any:
        """What the form of submit element N would send (`page.ELEMENT_FORM`'s reading), or None."""
        try:
            return await asyncio.wait_for(self._call(ELEMENT_FORM, number), READ_TIMEOUT)
        except (ActionFailed, TimeoutError):
            return None

    async def controls(self) -> Any:
        """The page's form controls as `page.PAGE_CONTROLS` reads them, or None when the page cannot be read."""
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        async def read() -> Any:
            tree = await self.cdp.send("Page.getFrameTree")
            world = await self.cdp.send(
                "Page.createIsolatedWorld",
                {"frameId": tree["frameTree"]["frame"]["id"], "worldName": "flarebot-controls"},
            )
            answer = await self.cdp.send(
                "Runtime.evaluate",
                {"expression": PAGE_CONTROLS, "contextId": world["executionContextId"], "returnByValue": True},
            )
            return answer.get("result", {}).get("value")

        try:
            return await asyncio.wait_for(read(), READ_TIMEOUT)
        except (PlaywrightError, TimeoutError, KeyError):
            return None

    async def _call(self, function: str, *arguments: Any) -> Any:
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        if self._world is None:
            raise ActionFailed("Read the page before acting on its elements.")
        try:
            answer = await self.cdp.send(
                "Runtime.callFunctionOn",
                {
                    "functionDeclaration": function,
                    "executionContextId": self._world,
                    "arguments": [{"value": a} for a in arguments],
                    "returnByValue": True,
                },
            )
        except PlaywrightError:
            raise ActionFailed("The page changed since it was read; read it again.") from None
        if "exceptionDetails" in answer:
            raise ActionFailed("The element could not be used.")
        return answer.get("result", {}).get("value")

    async def go_to(self, url: str) -> None:
        """Load a URL the network policy accepts."""
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        try:
            await addresses_checked(url_check(url))
        except Refused as refused:
            raise ActionFailed(f"The address was refused by the network policy: {refused.message}") from None
        self._world = None
        try:
            response = await self.page.goto(url, wait_until="load", timeout=ACTION_TIMEOUT * 1000)
        except PlaywrightError:
            raise ActionFailed(self._navigation_problem()) from None
        if response is not None and await response.header_value("x-flarebot-refused"):
            raise ActionFailed("The page or a redirect was refused by the network policy.")

    async def click(self, number: int) -> None:
        center = await self._call(ELEMENT_CENTER, number)
        if not isinstance(center, list) or len(center) != 2:
            raise ActionFailed(f"Element {number} is no longer on the page; read it again.")
        await self.page.mouse.click(float(center[0]), float(center[1]))
        self._world = None
        await self._settle()

    async def type(self, number: int, text: str) -> None:
        if not await self._call(ELEMENT_FOCUS_EMPTY, number):
            raise ActionFailed(f"Element {number} is not a text field that can be typed into.")
        # The field's text is selected: inserting replaces it in one input event (the page's
        # handlers see one change, as when a person pastes); only an empty text deletes.
        if text:
            await self.page.keyboard.insert_text(text)
        else:
            await self.page.keyboard.press("Delete")
        await asyncio.sleep(SETTLE)  # what the field's handlers send belongs to this action

    async def select(self, number: int, option: str) -> str:
        chosen = await self._call(ELEMENT_SELECT, number, option)
        if not isinstance(chosen, str):
            element = self.observation.element(number) if self.observation else None
            offered = ", ".join(element.options[:30]) if element and element.options else "none"
            raise ActionFailed(f"Element {number} has no option {option[:100]!r}. Its options: {offered}.")
        await self._settle()
        return chosen

    async def scroll(self, direction: str) -> None:
        await self.page.mouse.wheel(0, SCROLL_PIXELS if direction == "down" else -SCROLL_PIXELS)
        await asyncio.sleep(0.3)

    async def _settle(self) -> None:
        from playwright.async_api import Error as PlaywrightError  # loads on first use

        await asyncio.sleep(SETTLE)
        with contextlib.suppress(PlaywrightError):
            await self.page.wait_for_load_state("load", timeout=ACTION_TIMEOUT * 1000)

    def _navigation_problem(self) -> str:
        if self._refusals:
            return f"The page or a redirect was refused by the network policy: {self._refusals[-1]}"
        return "The page could not be loaded (the site could not be reached or broke off)."

    async def storage_state(self) -> dict[str, Any]:
        """The context's cookies and local storage, for a checkpoint (a secret: seal it)."""
        return dict(await self.context.storage_state())

    async def screenshot(self) -> bytes:
        """A JPEG of what the page shows now, for the owner's live view."""
        return await self.page.screenshot(type="jpeg", quality=60, timeout=5_000)

    # The owner's own input during a sign-in handoff: straight to the page, never recorded.

    async def input_click(self, x: float, y: float) -> None:
        await self.page.mouse.click(x, y)

    async def input_key(self, key: str) -> None:
        await self.page.keyboard.press(key)

    async def input_text(self, text: str) -> None:
        await self.page.keyboard.insert_text(text)

    async def input_scroll(self, delta_y: float) -> None:
        await self.page.mouse.wheel(0, delta_y)

    def close(self) -> asyncio.Future[bool]:
        """Close the context (once); True when closure is confirmed."""
        return browser_pool().close(self.lease_id)


async def session_open(
    *, task_id: uuid.UUID, conversation_id: uuid.UUID, storage_state: dict[str, Any] | None
) -> BrowserSession:
    """Open a task's context under a fresh lease (restoring a checkpoint's storage state if given)."""
    pool = browser_pool()
    lease_id = await db(browser_lease_open)(
        conversation_id=conversation_id,
        turn_id=task_id,
        tool_call_id=LEASE_TOOL_CALL_ID,
        expires_at=timezone.now() + RUNNING_LEASE,
    )
    call = CallContext(lease_id, conversation_id, task_id, LEASE_TOOL_CALL_ID)
    pool.track(call)
    try:
        browser = await pool.browser()
        options: dict[str, Any] = {
            "accept_downloads": False,
            "service_workers": "block",
            "java_script_enabled": True,
            "viewport": VIEWPORT,
            "locale": "en-US",
        }
        if storage_state is not None:
            options["storage_state"] = storage_state
        context = await asyncio.shield(pool.open(call, browser, **options))
        refusals: list[str] = []
        guard = RequestGuard()

        async def route(route: Route) -> None:
            request = route.request
            try:
                url_check(request.url)
            except Refused as refused:
                if request.url.partition(":")[0].lower() in ("http", "https"):
                    refusals.append(refused.message)
                    del refusals[:-REFUSALS_KEPT]
                await route.abort("blockedbyclient")
                return
            navigation = request.is_navigation_request()
            decision = guard.decide(
                method=request.method,
                url=request.url,
                post_data=_post_text(request.post_data_buffer),
                content_type=request.headers.get("content-type", ""),
                navigation=navigation,
                resource_type=request.resource_type,
                again=True,  # the page's own interception asked first, where it reaches
            )
            if decision is Decision.SEND:
                await route.continue_()
            elif navigation:
                await route.fulfill(status=204, body=b"")  # the frame keeps its page
            else:
                await route.abort("blockedbyclient")

        async def web_socket(socket: WebSocketRoute) -> None:
            await _web_socket(socket, guard)

        await context.add_init_script(PAGE_SCRIPT)
        await context.route("**/*", route)
        await context.route_web_socket(lambda url: True, web_socket)
        context.set_default_timeout((ACTION_TIMEOUT + CLOSE_TIMEOUT) * 1000)
        page = await context.new_page()
        context.on("page", lambda extra: _silence_extra(context, extra, page))
        cdp = await context.new_cdp_session(page)
        # Chromium says which navigations submit a form before their requests leave.
        cdp.on("Page.frameRequestedNavigation", lambda event: _form_navigation(guard, event))
        await cdp.send("Page.enable")
        await PageInterception(cdp, guard, refusals).start()
    except BaseException:
        await asyncio.shield(pool.close(lease_id))
        raise
    session = BrowserSession(task_id, conversation_id, lease_id, context, page, cdp, guard=guard)
    session._refusals = refusals
    return session


async def _web_socket(socket: WebSocketRoute, guard: RequestGuard) -> None:
    """Connect a page's WebSocket only if the guard sends it; its messages go out only while it may send."""
    from playwright.async_api import Error as PlaywrightError  # loads on first use

    url = socket.url
    scheme, _, rest = url.partition("://")
    try:
        url_check(f"{'https' if scheme.lower() == 'wss' else 'http'}://{rest}")
    except Refused:
        decision = Decision.REFUSE
    else:
        decision = guard.decide(
            method=WEBSOCKET, url=url, post_data=None, content_type="", navigation=False, resource_type="websocket"
        )
    if decision is not Decision.SEND:
        with contextlib.suppress(PlaywrightError):
            await socket.close(code=1008, reason="Refused")
        return
    server = socket.connect_to_server()
    socket.on_message(lambda message: server.send(message) if guard.socket_sends(url) else None)


def _post_text(body: bytes | None) -> str | None:
    return body.decode("utf-8", "replace") if body else None


def _form_navigation(guard: RequestGuard, event: dict[str, Any]) -> None:
    if str(event.get("reason", "")).startswith("formSubmission") and isinstance(event.get("url"), str):
        guard.form_navigation(event["url"])


async def session_lease_extend(session: BrowserSession, *, seconds: float) -> None:
    """Let the session's lease last `seconds` more (a running task's heartbeat, a kept context)."""
    await db(browser_lease_extend)(lease_id=session.lease_id, expires_at=timezone.now() + timedelta(seconds=seconds))


_silencing: set[asyncio.Future[None]] = set()


def _silence_extra(context: BrowserContext, extra: Page, main: Page) -> None:
    """Pop-ups and other pages of the context are refused everything and emptied at once."""
    if extra is not main:
        task = asyncio.ensure_future(popup_silence(context, extra))
        _silencing.add(task)
        task.add_done_callback(_silencing.discard)


async def owner_input_apply(session: BrowserSession, data: dict[str, Any]) -> None:
    """Apply one checked input of the owner to the page (never recorded); what it sends may go for a moment."""
    session.guard.owner_input()
    try:
        await _owner_input(session, data)
    finally:
        session.guard.owner_input()


async def _owner_input(session: BrowserSession, data: dict[str, Any]) -> None:
    kind = data["kind"]
    if kind == "click":
        await session.input_click(float(data["x"]), float(data["y"]))
    elif kind == "key":
        await session.input_key(data["key"])
    elif kind == "text":
        await session.input_text(data["text"])
    elif kind == "scroll":
        await session.input_scroll(float(data["delta_y"]))
