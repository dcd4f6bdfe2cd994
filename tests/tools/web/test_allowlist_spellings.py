"""The operator's allowlist in the browser tools: only its own spelling of an address, at the URL given.

The fixture web server is allowlisted as `127.0.0.1:<port>` (`tests/settings.py`). Chromium
rewrites numeric hosts (`2130706433`, `0x7f.1`, `127.1`) into that dotted form before the
proxy or a route sees them, so the URL the agent gives is checked before Chromium does;
what a page itself asks for reaches the policy only in the dotted form (README "Web
research").
"""

from __future__ import annotations

import uuid

import pytest

from conversations.browser_tasks.services import proposal_problem
from flarebot.core.database import db
from tests.support.tool_context import tool_context
from tools.browser_tasks.session import ActionFailed, session_open
from tools.models import BrowserLease
from tools.network.policy import OTHER_SPELLING
from tools.web.browser_read import browser_read
from tools.web.read_url import read_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("browser_pool_shut_after"),
]

SPELLINGS = ["2130706433", "0x7f.1", "127.1", "0177.0.0.1", "0x7f000001"]


@pytest.mark.parametrize("spelling", SPELLINGS)
async def test_browser_read_refuses_another_spelling_before_chromium_sees_it(web, spelling):
    hints: list[str] = []
    result = await browser_read(tool_context(hints=hints), {"url": f"http://{spelling}:{web.port}/article"})

    assert result == {
        "ok": False,
        "error": "refused",
        "rule": "other_spelling",
        "redirect": False,
        "message": OTHER_SPELLING,
    }
    assert hints == []  # it is allowed already: the model must write it as the allowlist does
    assert web.paths() == []
    assert await db(BrowserLease.objects.count)() == 0  # no browser context was opened


@pytest.mark.parametrize("spelling", SPELLINGS)
async def test_read_url_refuses_another_spelling_with_the_same_message(web, spelling):
    result = await read_url(tool_context(), {"url": f"http://{spelling}:{web.port}/article"})

    assert result == {
        "ok": False,
        "error": "refused",
        "rule": "other_spelling",
        "redirect": False,
        "message": OTHER_SPELLING,
    }
    assert web.paths() == []


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_browser_task_cannot_start_at_another_spelling(web, spelling):
    problem = proposal_problem(goal="Read it.", start_url=f"http://{spelling}:{web.port}/shop", restrictions=[])

    assert problem == f"start_url is refused by the network policy: {OTHER_SPELLING}"


async def test_a_browser_tasks_go_to_refuses_every_other_spelling_and_loads_the_allowlisted_one(web):
    session = await session_open(task_id=uuid.uuid4(), conversation_id=uuid.uuid4(), storage_state=None)
    try:
        for spelling in SPELLINGS:
            with pytest.raises(ActionFailed) as failed:
                await session.go_to(f"http://{spelling}:{web.port}/shop")
            assert failed.value.message == f"The address was refused by the network policy: {OTHER_SPELLING}"
        assert web.paths() == []

        await session.go_to(web.url("/shop"))

        assert web.paths() == ["/shop"]
    finally:
        assert await session.close()


async def test_a_pages_own_redirect_reaches_the_allowlisted_address_in_a_numeric_spelling(web):
    """What the README says of URLs Chromium parsed first; read_url, which parses them itself, refuses."""
    rendered = await browser_read(tool_context(), {"url": web.url("/redirect-numeric")})
    fetched = await read_url(tool_context(), {"url": web.url("/redirect-numeric")})

    assert rendered["ok"] is True
    assert rendered["sources"][0]["final_url"] == web.url("/article")
    assert fetched["ok"] is False
    assert OTHER_SPELLING in fetched["message"]
