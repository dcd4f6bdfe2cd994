"""One warm Chromium per worker process, a fresh context per browser_read call, and their closing.

The browser is found once (`chromium_path`: `FLAREBOT_CHROMIUM`, Debian's
`/usr/bin/chromium`, or what `playwright install chromium` placed) and started lazily on
the loop that runs the calls (the engine loop in a worker) through Playwright's async API.
It resolves no name itself and sends all its traffic, loopback included, through the
process's `PolicyProxy`, so every request of every page passes the network policy.

Each call's context is tracked by its lease id (`CallContext`). Opening runs as a task of
its own, so a context that arrives after its call was cancelled is still seen and closed;
closing is idempotent, bounded by `CLOSE_TIMEOUT`, and recorded on the lease. While any
context is open, a watcher polls the leases of this process for close requests from
elsewhere (conversation deletion, the cleanup job), and for wake requests of the contexts
that paused browser tasks keep here (`wakers`, see `tools.browser_tasks.sessions`).
"""

from __future__ import annotations

import asyncio
import glob
import importlib
import logging
import os
import threading
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from flarebot.core.database import db
from flarebot.core.hints import PLAYWRIGHT_INSTALL_COMMAND
from flarebot.core.probes import ProbeResult
from tools.network.policy import Refused
from tools.network.proxy import PolicyProxy
from tools.web.leases import (
    BROWSER_MARK,
    PROCESS_HOLDER,
    browser_lease_closed,
    browser_leases_close_requested,
    browser_leases_wake_take,
    holder_token,
)

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Playwright, ProxySettings

logger = logging.getLogger(__name__)

CLOSE_TIMEOUT = 5.0
WATCH_INTERVAL = 0.5
DEBIAN_CHROMIUM = "/usr/bin/chromium"
INSTALL_HINT = (
    "No Chromium was found for browser_read. Install one (`apt-get install chromium` on Debian, or "
    f"`{PLAYWRIGHT_INSTALL_COMMAND}`), or point FLAREBOT_CHROMIUM at it, then restart the worker."
)
LAUNCH_ARGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-dev-shm-usage",
    "--no-first-run",
    # Chromium resolves no name itself: every host goes to the proxy, which checks it.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
    # WebRTC would otherwise send UDP around the proxy.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
]

_chromium: tuple[str | None] | None = None
_proxy: PolicyProxy | None = None
_proxy_lock = threading.Lock()


def chromium_find() -> str | None:
    """Return the Chromium to use, looked for now (None when there is none)."""
    configured = settings.CONFIG.chromium
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    if os.access(DEBIAN_CHROMIUM, os.X_OK):
        return DEBIAN_CHROMIUM
    root = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or str(Path.home() / ".cache" / "ms-playwright")
    found = sorted(glob.glob(os.path.join(root, "chromium-*", "chrome-linux*", "chrome")), reverse=True)
    return next((path for path in found if os.access(path, os.X_OK)), None)


def chromium_path(*, refresh: bool = False) -> str | None:
    """The Chromium found at worker start (or at first use), cached for the process."""
    global _chromium
    if _chromium is None or refresh:
        _chromium = (chromium_find(),)
    return _chromium[0]


def chromium_problem() -> str | None:
    """What the owner must do for browser_read to work, or None."""
    if chromium_path() is not None:
        return None
    if settings.CONFIG.chromium:
        return "FLAREBOT_CHROMIUM does not name an executable browser; fix it and restart the worker."
    return INSTALL_HINT


def chromium_probe() -> ProbeResult:
    """The worker's probe for the System section: which Chromium browser_read would use."""
    path = chromium_find()
    if path is not None:
        return ProbeResult(state="ok", detail=path, fix=None)
    return ProbeResult(state="missing", detail="No Chromium was found on this worker.", fix=chromium_problem())


def _proxy_settings(proxy: PolicyProxy) -> ProxySettings:
    username, password = proxy.credential
    return {"server": f"http://127.0.0.1:{proxy.port}", "username": username, "password": password}


def policy_proxy() -> PolicyProxy:
    """The process's browser proxy, started on first use."""
    global _proxy
    with _proxy_lock:
        if _proxy is None:
            proxy = PolicyProxy()
            proxy.start()
            _proxy = proxy
        return _proxy


class BrowserUnavailable(Exception):
    """Chromium is missing or would not start."""


@dataclass
class CallContext:
    """The browser context of one call, from before it opens until it is closed."""

    lease_id: uuid.UUID
    conversation_id: uuid.UUID
    turn_id: uuid.UUID
    tool_call_id: str
    opening: asyncio.Future[BrowserContext] | None = None
    closing: asyncio.Future[bool] | None = None
    refusals: list[Refused] = field(default_factory=list)  # why the route refused requests, latest last
    phase: str = "opening"


class BrowserPool:
    """The browser of one event loop and the contexts of its calls."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._starting = asyncio.Lock()
        self.calls: dict[uuid.UUID, CallContext] = {}
        # Called (on this loop) when someone asks to wake what a lease's context keeps.
        self.wakers: dict[uuid.UUID, Callable[[], None]] = {}
        self._watcher: asyncio.Task[None] | None = None

    async def browser(self) -> Browser:
        """Return the warm browser, starting it (and Playwright) when needed."""
        # Playwright loads on first use, in a worker only, on a thread: not on the loop
        # that streams every answer.
        await asyncio.to_thread(importlib.import_module, "playwright.async_api")
        from playwright.async_api import async_playwright

        async with self._starting:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            path = chromium_path()
            if path is None:
                raise BrowserUnavailable(chromium_problem() or INSTALL_HINT)
            proxy = policy_proxy()
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            try:
                self._browser = await self._playwright.chromium.launch(
                    executable_path=path,
                    args=[*LAUNCH_ARGS, f"{BROWSER_MARK}{holder_token(PROCESS_HOLDER)}"],
                    proxy=_proxy_settings(proxy),
                    timeout=20_000,
                )
            except Exception as error:
                logger.exception("Chromium did not start")
                raise BrowserUnavailable("Chromium did not start; see the worker's log.") from error
            return self._browser

    def track(self, call: CallContext) -> None:
        self.calls[call.lease_id] = call
        if self._watcher is None or self._watcher.done():
            self._watcher = self.loop.create_task(self._watch())

    def open(self, call: CallContext, browser: Browser, **options: Any) -> asyncio.Future[BrowserContext]:
        """Start opening the call's context; the future outlives a cancelled caller."""
        call.opening = asyncio.ensure_future(browser.new_context(**options))
        return call.opening

    def close(self, lease_id: uuid.UUID) -> asyncio.Future[bool]:
        """Close a call's context (once, however often asked); True when closure is confirmed."""
        call = self.calls.get(lease_id)
        if call is None:
            done: asyncio.Future[bool] = self.loop.create_future()
            done.set_result(True)
            return done
        if call.closing is None:
            call.closing = asyncio.ensure_future(self._close(call))
        return call.closing

    def calls_of(self, *, turn_id: uuid.UUID, tool_call_id: str) -> list[CallContext]:
        return [c for c in self.calls.values() if c.turn_id == turn_id and c.tool_call_id == tool_call_id]

    async def _close(self, call: CallContext) -> bool:
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                if call.opening is not None:
                    try:
                        context = await asyncio.shield(call.opening)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        context = None  # it never opened
                    if context is not None:
                        await context_close(context)
                await db(browser_lease_closed)(lease_id=call.lease_id)
        except Exception:
            logger.warning("closing the browser context of lease %s failed", call.lease_id, exc_info=True)
            call.closing = None  # the next request tries again
            self._close_when_it_opens(call)
            return False
        self.calls.pop(call.lease_id, None)
        self.wakers.pop(call.lease_id, None)
        return True

    def _close_when_it_opens(self, call: CallContext) -> None:
        """A context still opening after its close gave up is closed the moment it arrives."""
        opening = call.opening
        if opening is None or opening.done():
            return

        def arrived(future: asyncio.Future[BrowserContext]) -> None:
            if not future.cancelled() and future.exception() is None:
                self.close(call.lease_id)

        opening.add_done_callback(arrived)

    async def _watch(self) -> None:
        """While contexts are open, close those whose lease someone asked to close."""
        while self.calls:
            await asyncio.sleep(WATCH_INTERVAL)
            try:
                wanted = await db(browser_leases_close_requested)(lease_ids=list(self.calls))
            except Exception:
                logger.warning("could not read close requests of browser leases", exc_info=True)
                continue
            for lease_id in wanted:
                self.wakers.pop(lease_id, None)
                self.close(lease_id)
            if self.wakers:
                try:
                    woken = await db(browser_leases_wake_take)(lease_ids=list(self.wakers))
                except Exception:
                    logger.warning("could not read wake requests of browser leases", exc_info=True)
                    continue
                for lease_id in woken:
                    waker = self.wakers.pop(lease_id, None)
                    if waker is not None:
                        waker()

    async def shutdown(self) -> None:
        """Close every context, the browser and Playwright (tests; a worker keeps its browser)."""
        for lease_id in list(self.calls):
            with suppress(Exception):
                await self.close(lease_id)
        if self._watcher is not None:
            self._watcher.cancel()
        if self._browser is not None:
            with suppress(Exception):
                await self._browser.close()
            self._browser = None
        if self._playwright is not None:
            with suppress(Exception):
                await self._playwright.stop()
            self._playwright = None


async def context_close(context: BrowserContext) -> None:
    """Close one browser context (the one place contexts are closed; tests make it fail)."""
    await context.close()


_pools: dict[asyncio.AbstractEventLoop, BrowserPool] = {}


def browser_pool() -> BrowserPool:
    """The pool of the running loop (one per worker process: the engine loop's)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        for old in [other for other in _pools if other.is_closed()]:
            _pools.pop(old, None)
        pool = _pools[loop] = BrowserPool(loop)
    return pool


def browser_pools() -> list[BrowserPool]:
    return list(_pools.values())
