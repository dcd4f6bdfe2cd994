"""Fixtures of the browser task tests: the machine-bound network rules of the web tests, a provider, a browser."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from conversations.cancel_bus import CancelListener
from tests.support.engine import engine_cleanup
from tests.tools.web.conftest import _stay_on_the_machine, dns, web, web_server
from tools.browser_tasks.kept import kept_sessions
from tools.web.browser import browser_pool

__all__ = ["_stay_on_the_machine", "dns", "web", "web_server"]


@pytest.fixture
async def cancels() -> AsyncIterator[CancelListener]:
    listener = CancelListener()
    yield listener
    await kept_sessions().shutdown()
    await browser_pool().shutdown()
    await engine_cleanup(listener)
