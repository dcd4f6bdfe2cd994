"""The forward proxy Chromium must use, so the browser's own traffic passes the same policy.

Chromium is started with `--proxy-server` pointing here (and Playwright's `<-loopback>`
bypass rule, so loopback goes through it too) and with a host resolver that resolves
nothing itself: every request and redirect of a page, subresources included, reaches the
proxy with its host name, and the proxy decides. An `https` (or `wss`) request arrives as
a CONNECT tunnel, a plain `http` one in absolute form. Either way the proxy checks the
target with `url_check` and `addresses_checked` and opens the upstream connection to a
checked address itself (pinned: Chromium keeps the Host header and, inside the tunnel, the
TLS server name). A refused target gets a 403 and is remembered for a minute
(`refusal_for`), so browser_read can say why a navigation failed.

Only the browser Flarebot launched may use it: the proxy asks every request for a
credential made at random for this process (`Proxy-Authorization: Basic`, answered with a
407 otherwise), which Chromium is given at launch and supplies for its pages. Chromium's
own background traffic (its component updater, the sign-in account check against
accounts.google.com) does not carry it, so it is refused before any lookup: the browser
tool never reports to Google on its own, and no other local program can use the proxy as
a relay. The one service of Chromium's own that a page's context calls with the
credential, its form-field predictions (`content-autofill.googleapis.com`, sent the form
signatures of every page read), is refused by name (`CHROMIUM_SERVICES`): no page
addresses it.

It runs on its own event loop in its own thread: page bytes never cost the loop that
streams turns, and the resolver's lookups run in that loop's executor.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict
from contextlib import suppress

from yarl import URL

from tools.network.policy import Refused, url_check
from tools.network.resolver import addresses_checked

logger = logging.getLogger(__name__)

HEAD_MAX = 64 * 1024
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
IDLE_TIMEOUT = 120.0  # a tunnel or response silent this long is closed
CHUNK = 64 * 1024
REFUSALS_KEPT = 256
REFUSAL_MEMORY = 60.0
_HOP_HEADERS = {b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"}
USERNAME = "flarebot"
# Hosts only Chromium itself calls from a page's context, never a page: refused by name.
CHROMIUM_SERVICES = frozenset({"content-autofill.googleapis.com"})
CHROMIUM_SERVICE_REFUSED = "Chromium's own form-prediction service is not used: pages never address it."


class PolicyProxy:
    """An HTTP forward proxy on 127.0.0.1 whose every upstream connection passes the policy."""

    def __init__(self) -> None:
        self.port = 0
        self._password = secrets.token_urlsafe(24)
        self._authorization = b"basic " + base64.b64encode(f"{USERNAME}:{self._password}".encode())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._refusals: OrderedDict[tuple[str, int], tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def start(self) -> int:
        """Start listening (in a thread of its own); return the port."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, "127.0.0.1", 0, limit=HEAD_MAX, backlog=256)
                )
            except OSError as error:
                failure.append(error)
                ready.set()
                return
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=serve, name="browser-proxy", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self.port

    def stop(self) -> None:
        if self._loop is None or self._server is None:
            return
        loop, server = self._loop, self._server

        async def close() -> None:
            server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        self._server = None

    @property
    def credential(self) -> tuple[str, str]:
        """The user name and password the browser must give (never logged)."""
        return USERNAME, self._password

    def _authorized(self, header_block: bytes) -> bool:
        for line in header_block.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"proxy-authorization":
                scheme, _, token = value.strip().partition(b" ")
                return hmac.compare_digest(scheme.lower() + b" " + token.strip(), self._authorization)
        return False

    def refusal_for(self, host: str, port: int) -> str | None:
        """Why the proxy refused this host and port in the last minute, if it did."""
        with self._lock:
            found = self._refusals.get((host.lower(), port))
        if found is None or time.monotonic() - found[1] > REFUSAL_MEMORY:
            return None
        return found[0]

    def _remember(self, host: str, port: int, message: str) -> None:
        with self._lock:
            self._refusals[(host.lower(), port)] = (message, time.monotonic())
            self._refusals.move_to_end((host.lower(), port))
            while len(self._refusals) > REFUSALS_KEPT:
                self._refusals.popitem(last=False)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            request_line, _, header_block = head.partition(b"\r\n")
            parts = request_line.split(b" ")
            if len(parts) != 3:
                await _reply(writer, 400, "Bad Request")
                return
            method, target, version = (part.decode("latin-1") for part in parts)
            if not self._authorized(header_block):
                logger.debug("browser proxy: %s %s without the browser's credential, refused", method, target)
                await _reply(writer, 407, "Proxy Authentication Required")
                return
            if method == "CONNECT":
                raw_url = f"http://{target}/"
            else:
                raw_url = target
                if not target.lower().startswith("http://"):
                    await _reply(writer, 400, "Bad Request")
                    return
            try:
                checked = url_check(raw_url)
                if checked.host.rstrip(".") in CHROMIUM_SERVICES:  # the policy gives it in lower case
                    raise Refused("browser_service", CHROMIUM_SERVICE_REFUSED)
                addresses = await addresses_checked(checked)
            except Refused as refused:
                self._remember_target(raw_url, refused.message)
                await _reply(writer, 403, "Forbidden", refused=refused.code)
                return
            upstream_reader, upstream = await _connect(addresses, checked.port)
            if upstream is None or upstream_reader is None:
                await _reply(writer, 502, "Bad Gateway")
                return
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                path = checked.url.raw_path_qs or "/"
                lines = [f"{method} {path} {version}".encode("latin-1")]
                for line in header_block.split(b"\r\n"):
                    name = line.partition(b":")[0].strip().lower()
                    if line and name not in _HOP_HEADERS:
                        lines.append(line)
                lines.append(b"Connection: close")
                upstream.write(b"\r\n".join(lines) + b"\r\n\r\n")
            await _pipe_both(reader, writer, upstream_reader, upstream)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
            pass
        except Exception:
            logger.exception("browser proxy connection failed")
        finally:
            for stream in (writer, upstream):
                if stream is not None:
                    stream.close()

    def _remember_target(self, raw_url: str, message: str) -> None:
        with suppress(ValueError):
            parsed = URL(raw_url)
            if parsed.raw_host is not None and parsed.port is not None:
                self._remember(parsed.raw_host, parsed.port, message)


async def _connect(addresses: list[str], port: int) -> tuple[asyncio.StreamReader | None, asyncio.StreamWriter | None]:
    """Connect to the first checked address that answers (never to anything else)."""
    for address in addresses:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                return await asyncio.open_connection(address, port, limit=CHUNK)
        except (OSError, TimeoutError):
            continue
    return None, None


async def _reply(writer: asyncio.StreamWriter, status: int, reason: str, *, refused: str = "") -> None:
    body = f"{status} {reason}: refused by Flarebot's network policy.\n".encode() if refused else b""
    marker = f"X-Flarebot-Refused: {refused}\r\n" if refused else ""
    if status == 407:
        marker = 'Proxy-Authenticate: Basic realm="Flarebot browser"\r\n'
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\n{marker}Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    with suppress(ConnectionError):
        await writer.drain()


async def _pipe_both(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy bytes both ways until either side closes or stays silent for IDLE_TIMEOUT."""
    up = asyncio.ensure_future(_pipe(client_reader, upstream_writer))
    down = asyncio.ensure_future(_pipe(upstream_reader, client_writer))
    try:
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if down.done():
            up.cancel()
        else:
            # The client finished sending (a request body, or a half-closed tunnel):
            # the answer may still be coming.
            await down
    finally:
        for task in (up, down):
            task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await task


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        async with asyncio.timeout(IDLE_TIMEOUT):
            data = await reader.read(CHUNK)
        if not data:
            return
        writer.write(data)
        await writer.drain()
