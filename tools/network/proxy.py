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

A client connection carries exactly one request, checked on its own (credential, target,
refusal memory), and is then closed. A CONNECT forwards nothing of its head; after the
200 the tunnel's bytes go to the checked address (Chromium tunnels `ws` WebSockets too).
A plain request goes upstream with a head the proxy rebuilds, without any hop-by-hop
field (the credential among them) and with `Connection: close`, followed by exactly the
body its `Content-Length` declares; its one answer comes back marked `Connection: close`
(`tools.network.http1`). So nothing of a connection past its first request is passed on,
whatever the client pipelines or the upstream answers (`keep-alive`, HTTP/1.0), and
Chromium sends its next request on a new connection, checked like the first. Why not
serve a loop of requests per connection: the proxy would have to find where each request
and each answer ends on a shared connection, and one mistake there would carry a request
past the checks or an answer to another site's request; one request per connection
costs a loopback connection per plain-http request and rules both out.

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

from tools.network import http1
from tools.network.http1 import CHUNK, HEAD_MAX
from tools.network.policy import Refused, Target, url_check
from tools.network.resolver import addresses_checked

logger = logging.getLogger(__name__)

HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
REFUSALS_KEPT = 256
REFUSAL_MEMORY = 60.0
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
        self._refusals: OrderedDict[tuple[str, int], tuple[Refused, float]] = OrderedDict()
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

    def _authorized(self, request: http1.RequestHead) -> bool:
        """Whether the request's (first) Proxy-Authorization is this process's credential."""
        given = request.values(b"proxy-authorization")
        if not given:
            return False
        scheme, _, token = given[0].partition(b" ")
        return hmac.compare_digest(scheme.lower() + b" " + token.strip(), self._authorization)

    def refusal_for(self, host: str, port: int) -> Refused | None:
        """Why the proxy refused this host and port in the last minute, if it did."""
        with self._lock:
            found = self._refusals.get((host.lower(), port))
        if found is None or time.monotonic() - found[1] > REFUSAL_MEMORY:
            return None
        return found[0]

    def _remember(self, host: str, port: int, refused: Refused) -> None:
        with self._lock:
            self._refusals[(host.lower(), port)] = (refused, time.monotonic())
            self._refusals.move_to_end((host.lower(), port))
            while len(self._refusals) > REFUSALS_KEPT:
                self._refusals.popitem(last=False)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve the one request of a client connection, then close it."""
        try:
            request = await self._request_read(reader, writer)
            if request is not None:
                await self._serve(request, reader, writer)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, OSError):
            pass
        except Exception:
            logger.exception("browser proxy connection failed")
        finally:
            writer.close()

    async def _request_read(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> http1.RequestHead | None:
        """Read the connection's request head; answer and return None if it goes no further."""
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                request = http1.request_parse(await http1.head_lines(reader))
        except http1.MessageInvalid:
            await _reply(writer, 400, "Bad Request")
            return None
        if not self._authorized(request):
            logger.debug(
                "browser proxy: %s %s without the browser's credential, refused", request.method, request.target
            )
            await _reply(writer, 407, "Proxy Authentication Required")
            return None
        return request

    async def _serve(
        self, request: http1.RequestHead, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Check the request's target, connect to a checked address, and tunnel or forward."""
        tunnel = request.method == "CONNECT"
        raw_url = f"http://{request.target}/" if tunnel else request.target
        try:
            if not tunnel and not raw_url.lower().startswith("http://"):
                raise http1.MessageInvalid("not an absolute http URL")
            body_length = 0 if tunnel else http1.request_body_length(request)
        except http1.MessageInvalid:
            await _reply(writer, 400, "Bad Request")
            return
        try:
            checked = url_check(raw_url)
            if checked.host.rstrip(".") in CHROMIUM_SERVICES:  # the policy gives it in lower case
                raise Refused("browser_service", CHROMIUM_SERVICE_REFUSED)
            addresses = await addresses_checked(checked)
        except Refused as refused:
            self._remember_target(raw_url, refused)
            await _reply(writer, 403, "Forbidden", refused=refused.code)
            return
        upstream_reader, upstream = await _connect(addresses, checked.port)
        if upstream is None or upstream_reader is None:
            await _reply(writer, 502, "Bad Gateway")
            return
        try:
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
                await _pipe_both(reader, writer, upstream_reader, upstream)
            else:
                await _forward(request, checked, body_length, (reader, writer), (upstream_reader, upstream))
        except http1.MessageInvalid:
            await _reply(writer, 502, "Bad Gateway")
        finally:
            upstream.close()

    def _remember_target(self, raw_url: str, refused: Refused) -> None:
        with suppress(ValueError):
            parsed = URL(raw_url)
            if parsed.raw_host is not None and parsed.port is not None:
                self._remember(parsed.raw_host, parsed.port, refused)


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


async def _forward(
    request: http1.RequestHead,
    checked: Target,
    body_length: int,
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Send the request upstream, its head rebuilt, with exactly its body; relay the one answer."""
    upstream[1].write(http1.request_head_forwarded(request, checked.url.raw_path_qs or "/"))
    # The body goes up while the answer comes down: a site may answer before reading it all.
    sending = asyncio.ensure_future(http1.copy_exact(client[0], upstream[1], body_length))
    try:
        await http1.response_relay(upstream[0], client[1], bodiless=request.method == "HEAD")
    finally:
        sending.cancel()
        with suppress(asyncio.CancelledError, Exception):
            await sending


async def _pipe_both(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy bytes both ways until either side closes or stays silent for IDLE_TIMEOUT."""
    up = asyncio.ensure_future(http1.copy_until_eof(client_reader, upstream_writer))
    down = asyncio.ensure_future(http1.copy_until_eof(upstream_reader, client_writer))
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
