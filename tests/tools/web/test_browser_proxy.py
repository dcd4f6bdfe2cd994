"""The browser's policy proxy serves only the Chromium Flarebot launched, never its own background calls.

Requests reach the proxy on loopback; the only names looked up go to the test's FakeDns,
and the socket guard fails a test that tried to leave the machine.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Iterator

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
    assert policy_proxy().refusal_for("content-autofill.googleapis.com", 443) in (None, CHROMIUM_SERVICE_REFUSED)


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
    assert proxy.refusal_for(spelling, 443) == CHROMIUM_SERVICE_REFUSED
    assert dns.asked == []


def background_refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if REFUSED_WITHOUT_CREDENTIAL in record.getMessage() and "127.0.0.1" not in record.getMessage()
    ]
