"""Fixtures of the web tool tests, which must not be able to send a packet off the machine.

Every test here runs with the socket guard armed (`tests.support.socket_guard`: any
connection or lookup beyond loopback is refused and fails the test) and with the policy's
resolver replaced by a `FakeDns` table, so no real DNS is ever asked. The loopback fixture
web server is reached through `FLAREBOT_NETWORK_ALLOW`, set for the test run in
`tests/settings.py`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.support import socket_guard
from tests.support.fake_dns import FakeDns
from tests.support.web_fixtures import FixtureWeb, fixture_web_start
from tools.network import resolver
from tools.web.browser import browser_pool


@pytest.fixture(autouse=True)
def _stay_on_the_machine() -> Iterator[None]:
    socket_guard.take_violations()
    socket_guard.arm()
    try:
        yield
    finally:
        socket_guard.disarm()
    left = socket_guard.take_violations()
    assert not left, f"code under test tried to leave the machine: {left}"


@pytest.fixture(autouse=True)
def dns(monkeypatch) -> FakeDns:
    fake = FakeDns()
    monkeypatch.setattr(resolver, "lookup", fake.lookup)
    return fake


@pytest.fixture(scope="session")
def web_server() -> FixtureWeb:
    # Started once per test run and left to end with it: the chat page's tests share it.
    return fixture_web_start()


@pytest.fixture
def web(web_server: FixtureWeb) -> Iterator[FixtureWeb]:
    web_server.reset()
    yield web_server
    web_server.reset()


@pytest.fixture
async def browser_pool_shut_after() -> AsyncIterator[None]:
    """The test's browser, its contexts and Playwright are closed when it ends."""
    yield
    await browser_pool().shutdown()
