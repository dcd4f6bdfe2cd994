"""The browser's policy proxy serves only the Chromium Flarebot launched, never its own background calls.

Requests reach the proxy on loopback; the only names looked up go to the test's FakeDns,
and the socket guard fails a test that tried to leave the machine. The connection tests
speak raw HTTP/1.1 to the proxy, and their upstream (`RecordingSite`) is a loopback site
that keeps every connection open whatever the request says and records every byte it
receives: had the proxy copied a follow-up request through, the site would have it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import suppress
from dataclasses import dataclass, field

import pytest

from tests.support.tool_context import tool_context
from tools.network.proxy import CHROMIUM_SERVICE_REFUSED, PolicyProxy
from tools.web.browser import policy_proxy
from tools.web.browser_read import browser_read

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("browser_pool_shut_after"),
]

REFUSED_WITHOUT_CREDENTIAL = "without the browser's credential"
CHUNK = 64 * 1024


@pytest.fixture
def proxy() -> Iterator[PolicyProxy]:
    started = PolicyProxy()
    started.start()
    yield started
    started.stop()


async def ask(proxy: PolicyProxy, request_line: str, *headers: str) -> bytes:
    """Send one request head to the proxy; return its status line and headers."""
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write("\r\n".join([request_line, *headers, "", ""]).encode("latin-1"))
        await writer.drain()
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    finally:
        writer.close()


def basic(username: str, password: str) -> str:
    return "Proxy-Authorization: Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(None, id="none"),
        pytest.param(basic("flarebot", "not-the-password"), id="a wrong password"),
        pytest.param("Proxy-Authorization: Bearer x", id="another scheme"),
        pytest.param("Proxy-Authorization: Basic", id="an empty one"),
    ],
)
async def test_a_request_without_the_browsers_credential_is_refused_before_any_lookup(proxy, dns, authorization):
    dns.add("shop.example", "203.0.113.7")
    headers = [authorization] if authorization else []

    connect = await ask(proxy, "CONNECT shop.example:443 HTTP/1.1", "Host: shop.example:443", *headers)
    plain = await ask(proxy, "GET http://shop.example/ HTTP/1.1", "Host: shop.example", *headers)

    for answer in (connect, plain):
        assert answer.startswith(b"HTTP/1.1 407 "), answer
        assert b'Proxy-Authenticate: Basic realm="Flarebot browser"' in answer
    assert dns.asked == []


async def test_the_browsers_credential_opens_the_tunnel_and_never_appears_in_the_log(proxy, web, dns, caplog):
    caplog.set_level(logging.DEBUG, logger="tools.network.proxy")
    username, password = proxy.credential
    target = f"127.0.0.1:{web.port}"

    answer = await ask(proxy, f"CONNECT {target} HTTP/1.1", f"Host: {target}", basic(username, password))
    await ask(proxy, f"CONNECT {target} HTTP/1.1", f"Host: {target}")  # refused, and logged at debug

    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert REFUSED_WITHOUT_CREDENTIAL in caplog.text
    assert password not in caplog.text
    assert password != PolicyProxy().credential[1]  # made at random for each proxy


async def test_chromiums_own_requests_are_refused_and_never_looked_up(web, dns, caplog):
    caplog.set_level(logging.DEBUG, logger="tools.network.proxy")

    # A page with a form: Chromium would send its field signatures for predictions.
    result = await browser_read(tool_context(), {"url": web.url("/signin")})

    assert result["ok"] is True
    # Chromium asks for its updates and its sign-in accounts shortly after it starts.
    deadline = time.monotonic() + 20
    while not background_refusals(caplog) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert background_refusals(caplog), "Chromium sent nothing of its own to check within 20 s"
    assert all(host in ("127.0.0.1", "localhost") for host in dns.asked), dns.asked
    assert policy_proxy().credential[1] not in caplog.text
    remembered = policy_proxy().refusal_for("content-autofill.googleapis.com", 443)
    assert remembered is None or remembered.message == CHROMIUM_SERVICE_REFUSED


@pytest.mark.parametrize(
    "spelling",
    ["content-autofill.googleapis.com", "Content-Autofill.GoogleAPIs.com", "content-autofill.googleapis.com."],
)
async def test_chromiums_form_prediction_service_is_refused_by_name_even_with_the_credential(proxy, dns, spelling):
    dns.add("content-autofill.googleapis.com", "203.0.113.9")
    dns.add("content-autofill.googleapis.com.", "203.0.113.9")
    username, password = proxy.credential

    answer = await ask(proxy, f"CONNECT {spelling}:443 HTTP/1.1", f"Host: {spelling}:443", basic(username, password))

    assert answer.startswith(b"HTTP/1.1 403 "), answer
    assert b"X-Flarebot-Refused: browser_service" in answer
    remembered = proxy.refusal_for(spelling, 443)
    assert (remembered.rule, remembered.entry, remembered.message) == (
        "browser_service",
        None,
        CHROMIUM_SERVICE_REFUSED,
    )
    assert dns.asked == []


def background_refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if REFUSED_WITHOUT_CREDENTIAL in record.getMessage() and "127.0.0.1" not in record.getMessage()
    ]


KEEP_ALIVE_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\nKeep-Alive: timeout=60\r\n\r\nok\n"
)
# Fields about one connection, which no site may receive (X-Hop: named by Connection).
HOP_FIELDS = {
    b"keep-alive",
    b"proxy-authenticate",
    b"proxy-authorization",
    b"proxy-connection",
    b"te",
    b"trailer",
    b"upgrade",
    b"x-hop",
}


@dataclass
class RecordingSite:
    """A loopback site that answers every request with `answer` and never closes a connection itself."""

    answer: bytes = KEEP_ALIVE_ANSWER
    port: int = 0
    received: bytearray = field(default_factory=bytearray)  # every byte of every connection
    heads: list[bytes] = field(default_factory=list)  # each request head, as received
    open_connections: int = 0
    _server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()

    async def settled(self) -> None:
        """Wait (5 s at most) until the proxy has closed every connection it opened here."""
        with suppress(TimeoutError):
            async with asyncio.timeout(5):
                while self.open_connections:
                    await asyncio.sleep(0.01)

    def request_lines(self) -> list[bytes]:
        return [head.split(b"\r\n")[0] for head in self.heads]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.received += head
                self.heads.append(head)
                length = next(
                    (int(line[15:]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")), 0
                )
                self.received += await reader.readexactly(length)
                writer.write(self.answer)
                await writer.drain()
        except asyncio.IncompleteReadError as ended:
            self.received += ended.partial
        except ConnectionError:
            pass
        finally:
            self.open_connections -= 1
            writer.close()


@pytest.fixture
async def site(settings) -> AsyncIterator[RecordingSite]:
    """The recording site, on a loopback port the operator's allowlist lists for this test."""
    started = RecordingSite()
    await started.start()
    settings.CONFIG = dataclasses.replace(
        settings.CONFIG, network_allow=(*settings.CONFIG.network_allow, ("127.0.0.1", started.port))
    )
    yield started
    await started.stop()


@pytest.fixture
async def refused_site() -> AsyncIterator[RecordingSite]:
    """A recording site on a loopback port nobody allowed: whatever reaches it got past the policy."""
    started = RecordingSite()
    await started.start()
    yield started
    await started.stop()


def request(target: str, *headers: str, method: str = "GET", body: bytes = b"") -> bytes:
    """A plain-http request in the absolute form Chromium sends to its proxy."""
    host = target.split("/")[2]
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", *headers]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join([*lines, "", ""]).encode("latin-1") + body


async def read_until_closed(reader: asyncio.StreamReader) -> tuple[bytes, bool]:
    """What the proxy sends within 5 s, and whether it had closed the connection by then."""
    received = b""
    try:
        async with asyncio.timeout(5):
            while data := await reader.read(CHUNK):
                received += data
    except TimeoutError:
        return received, False
    except ConnectionResetError:  # closed with our unread follow-up still in its buffer
        pass
    return received, True


def answer_heads(answer: bytes) -> tuple[list[bytes], bytes]:
    """The heads of an answer (interim ones first) and its body."""
    heads: list[bytes] = []
    rest = answer
    while not heads or heads[-1].split(b" ")[1].startswith(b"1"):
        head, _, rest = rest.partition(b"\r\n\r\n")
        heads.append(head)
    return heads, rest


async def send_alone(proxy: PolicyProxy, data: bytes) -> tuple[bytes, bool]:
    """Send data on a connection of its own; return the answer and whether the proxy closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(data)
        await writer.drain()
        return await read_until_closed(reader)
    finally:
        writer.close()


def assert_no_hop_field(site: RecordingSite, proxy: PolicyProxy) -> None:
    """The site got neither the proxy's credential nor any field about the client's connection."""
    token = basic(*proxy.credential).rsplit(" ", 1)[1].encode()
    assert token not in site.received
    for head in site.heads:
        fields = [line.partition(b":") for line in head.split(b"\r\n")[1:] if line]
        assert not {name.strip().lower() for name, _, _ in fields} & HOP_FIELDS, head
        assert [value.strip() for name, _, value in fields if name.strip().lower() == b"connection"] == [b"close"]


async def test_a_kept_alive_connection_serves_one_request_and_nothing_after_it_reaches_the_site(proxy, site):
    credential = basic(*proxy.credential)
    url = f"http://127.0.0.1:{site.port}"
    hops = (
        "Proxy-Connection: keep-alive",
        "Connection: keep-alive, X-Hop",
        "X-Hop: named by Connection",
        "Keep-Alive: 300",
        "TE: trailers",
        "Trailer: X-Checksum",
        "Upgrade: h2c",
        'Proxy-Authenticate: Basic realm="x"',
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(request(f"{url}/first", credential, *hops, "X-Kept: end to end", method="POST", body=b"a=1"))
        await writer.drain()
        async with asyncio.timeout(5):
            head = await reader.readuntil(b"\r\n\r\n")
            body = await reader.readexactly(3)
        # The site said keep-alive: a client sends its next requests on the same connection.
        with suppress(ConnectionError):
            writer.write(request(f"{url}/second", credential) + request(f"{url}/third"))
            await writer.drain()
        rest, closed = await read_until_closed(reader)
    finally:
        writer.close()
    await site.settled()

    assert site.request_lines() == [b"POST /first HTTP/1.1"]
    assert_no_hop_field(site, proxy)
    assert b"x-kept: end to end" in bytes(site.received).lower()
    assert bytes(site.received).endswith(b"\r\n\r\na=1")
    assert head.startswith(b"HTTP/1.1 200 "), head
    assert b"\r\nConnection: close\r\n" in head
    assert b"keep-alive" not in head.lower()
    assert body == b"ok\n"
    # Closed after the one answer, as it said: Chromium sends the next request on a new connection.
    assert (rest, closed) == (b"", True)


async def test_requests_pipelined_after_the_first_reach_nothing_and_are_checked_when_sent_again(
    proxy, site, refused_site
):
    credential = basic(*proxy.credential)
    url = f"http://127.0.0.1:{site.port}"
    without_credential = request(f"{url}/no-credential")
    to_a_port_not_allowed = request(f"http://127.0.0.1:{refused_site.port}/not-allowed", credential)
    allowed = request(f"{url}/second", credential)

    answer, closed = await send_alone(
        proxy, request(f"{url}/first", credential) + without_credential + to_a_port_not_allowed + allowed
    )
    await site.settled()

    assert site.request_lines() == [b"GET /first HTTP/1.1"]
    assert refused_site.received == b""
    assert_no_hop_field(site, proxy)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    assert answer.count(b"HTTP/1.") == 1, answer
    assert closed

    # Sent again, each on a connection of its own, every one is checked on its own.
    refused_for_credential, _ = await send_alone(proxy, without_credential)
    refused_by_policy, _ = await send_alone(proxy, to_a_port_not_allowed)
    served, _ = await send_alone(proxy, allowed)
    await site.settled()

    assert refused_for_credential.startswith(b"HTTP/1.1 407 "), refused_for_credential
    assert refused_by_policy.startswith(b"HTTP/1.1 403 "), refused_by_policy
    assert b"X-Flarebot-Refused: " in refused_by_policy
    assert proxy.refusal_for("127.0.0.1", refused_site.port) is not None
    assert served.startswith(b"HTTP/1.1 200 "), served
    assert refused_site.received == b""
    assert site.request_lines() == [b"GET /first HTTP/1.1", b"GET /second HTTP/1.1"]
    assert_no_hop_field(site, proxy)


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        pytest.param(KEEP_ALIVE_ANSWER, b"ok\n", id="HTTP/1.1 keep-alive"),
        pytest.param(
            b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: Keep-Alive\r\nKeep-Alive: max=5\r\n\r\nok\n",
            b"ok\n",
            id="HTTP/1.0 keep-alive",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
            b"2\r\nok\r\n1;ext=1\r\n\n\r\n0\r\nX-Trailer: t\r\n\r\n",
            b"2\r\nok\r\n1;ext=1\r\n\n\r\n0\r\nX-Trailer: t\r\n\r\n",
            id="chunked keep-alive",
        ),
        pytest.param(
            b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nConnection: keep-alive\r\n\r\n"
            b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n",
            b"",
            id="interim then no content",
        ),
    ],
)
async def test_an_answer_that_keeps_the_connection_alive_still_ends_the_clients_connection(proxy, site, answer, body):
    site.answer = answer
    credential = basic(*proxy.credential)
    url = f"http://127.0.0.1:{site.port}"
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(request(f"{url}/first", credential))
        await writer.drain()
        answered, closed = await read_until_closed(reader)
        with suppress(ConnectionError):  # nothing more may go through, credential or not
            writer.write(request(f"{url}/second", credential))
            await writer.drain()
    finally:
        writer.close()
    await site.settled()

    assert site.request_lines() == [b"GET /first HTTP/1.1"]
    assert_no_hop_field(site, proxy)
    heads, received_body = answer_heads(answered)
    assert received_body == body
    assert len(heads) == (2 if answer.startswith(b"HTTP/1.1 103") else 1)
    for head in heads:
        assert b"\r\nConnection: close\r\n" in head + b"\r\n", answered
        assert b"keep-alive" not in head.lower(), answered
    assert closed


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(("Transfer-Encoding: chunked",), id="a chunked upload"),
        pytest.param(("Content-Length: 3", "Content-Length: 40"), id="two lengths"),
        pytest.param(("Content-Length: +3",), id="a signed length"),
        pytest.param(("X-Note: folded", " Transfer-Encoding: chunked"), id="a folded field"),
        pytest.param(("X-Note: a\rTransfer-Encoding: chunked",), id="a bare carriage return"),
    ],
)
async def test_a_request_whose_end_could_be_read_two_ways_is_refused_and_reaches_nothing(proxy, site, fields):
    credential = basic(*proxy.credential)
    url = f"http://127.0.0.1:{site.port}"
    smuggled = request(f"{url}/smuggled", credential)
    head = request(f"{url}/first", credential, *fields, method="POST")

    answer, closed = await send_alone(proxy, head + b"3\r\na=1\r\n0\r\n\r\n" + smuggled)
    await site.settled()

    assert site.received == b""
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert closed
