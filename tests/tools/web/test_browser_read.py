"""browser_read in real Chromium against the loopback fixture web server, in this process.

The browser's traffic goes through the policy proxy, whose lookups use the test's FakeDns
and whose connections the socket guard watches; the pages only ever name loopback
addresses, so even a browser that bypassed the proxy could not leave the machine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from flarebot.core.database import db
from tests.support.tool_context import tool_context
from tools.models import BrowserLease, BrowserLeaseState
from tools.registry import CleanupRequest
from tools.web import browser as browser_module
from tools.web import browser_read as browser_read_module
from tools.web.browser import INSTALL_HINT, browser_pool, chromium_path
from tools.web.browser_read import browser_available, browser_cleanup, browser_read
from tools.web.leases import browser_lease_cleanup_run
from tools.web.read_url import read_url

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("browser_pool_shut_after"),
]


async def leases() -> list[BrowserLease]:
    return await db(lambda: list(BrowserLease.objects.order_by("created_at")))()


async def render(url: str, **data) -> dict:
    return await browser_read(tool_context(), {"url": url, **data})


async def test_it_reads_content_that_only_javascript_renders(web):
    plain = await read_url(tool_context(), {"url": web.url("/js-only")})
    rendered = await render(web.url("/js-only"))

    assert "the answer is 42" not in plain["sources"][0]["content"]
    assert rendered["ok"] is True
    [source] = rendered["sources"]
    assert "Rendered by JavaScript: the answer is 42." in source["content"]
    assert source["title"] == "Rendered page"
    assert (source["kind"], source["requested_url"], source["final_url"]) == (
        "browser",
        web.url("/js-only"),
        web.url("/js-only"),
    )


async def test_it_records_a_lease_before_the_context_opens_and_closes_it(web, monkeypatch):
    seen_before_open: list[list[str]] = []
    real_open = browser_module.BrowserPool.open

    def open_and_look(self, call, browser, **options):
        with ThreadPoolExecutor(1) as thread:  # the rows as they are right now, read off the loop
            seen_before_open.append(thread.submit(lambda: [x.state for x in BrowserLease.objects.all()]).result())
        return real_open(self, call, browser, **options)

    monkeypatch.setattr(browser_module.BrowserPool, "open", open_and_look)

    result = await render(web.url("/article"))

    assert result["ok"] is True
    assert seen_before_open == [["open"]]
    [lease] = await leases()
    assert (lease.state, lease.closed_at is not None) == (BrowserLeaseState.CLOSED, True)
    assert browser_pool().calls == {}


async def test_it_waits_for_a_selector(web):
    result = await render(web.url("/late"), wait_for_selector="#late")

    assert "The late table arrived." in result["sources"][0]["content"]


async def test_it_fails_when_the_selector_never_appears(web, monkeypatch):
    # A warm browser first, so that the short budget goes to waiting for the selector,
    # not to starting Chromium on a busy machine.
    assert (await render(web.url("/article")))["ok"] is True
    monkeypatch.setattr(browser_read_module, "BUDGET", 3.0)

    result = await render(web.url("/article"), wait_for_selector="#never-there")

    assert result == {"ok": False, "error": "selector", "message": "The selector did not appear within 3 s."}
    assert [lease.state for lease in await leases()] == [BrowserLeaseState.CLOSED] * 2


async def test_it_refuses_a_selector_that_chains_other_engines(web):
    result = await render(web.url("/article"), wait_for_selector="div >> xpath=//p")

    assert (result["ok"], result["error"]) == (False, "selector")
    assert web.paths() == []


async def test_it_blocks_subresources_to_private_addresses(web, dns):
    dns.add("metadata.example.org", "169.254.169.254")

    result = await render(web.url("/private-subresource"))

    assert result["ok"] is True
    assert "A page with a private subresource." in result["sources"][0]["content"]
    assert web.paths(web.other_port) == []
    assert "metadata.example.org" in dns.asked


@pytest.mark.parametrize("path", ["/redirect-private", "/redirect-other-port", "/redirect-localhost"])
async def test_it_refuses_redirects_the_policy_refuses(web, path):
    result = await render(web.url(path))

    assert result["ok"] is False
    assert result["error"] == "refused"
    assert web.paths(web.other_port) == []


async def test_it_names_the_rule_of_a_redirect_the_browser_was_refused_and_tells_the_owner_the_entry(web):
    hints: list[str] = []

    result = await browser_read(tool_context(hints=hints), {"url": web.url("/redirect-other-port")})

    assert (result["ok"], result["error"], result["rule"], result["redirect"]) == (False, "refused", "port", True)
    assert result["message"] == (
        "The page or a redirect was refused by the network policy: The operator allows this host on another"
        f" port only; port {web.other_port} is not allowed. The URL names a loopback address, which Flarebot"
        " may not reach."
    )
    assert "FLAREBOT_NETWORK_ALLOW" not in str(result)
    assert [f"FLAREBOT_NETWORK_ALLOW=127.0.0.1:{web.other_port} " in hint for hint in hints] == [True]
    assert web.paths(web.other_port) == []


async def test_it_refuses_an_initial_url_before_starting_anything(web):
    result = await render(web.other_url("/secret"))

    assert (result["ok"], result["error"]) == (False, "refused")
    assert await leases() == []


async def test_it_fails_on_a_status_outside_2xx(web):
    result = await render(web.url("/missing"))

    assert result == {"ok": False, "error": "http_status", "message": "The page answered with HTTP status 404."}


async def test_it_takes_the_final_url_from_the_main_frame_after_redirects(web):
    [source] = (await render(web.url("/redirect-relative")))["sources"]

    assert (source["requested_url"], source["final_url"]) == (web.url("/redirect-relative"), web.url("/article"))


async def test_it_returns_at_most_twenty_validated_links(web):
    links = (await render(web.url("/links")))["links"]

    urls = [link["url"] for link in links]
    assert len(links) == 20
    assert urls[:3] == ["https://example.org/a", web.url("/relative"), "https://example.org/page/0"]
    assert links[0]["text"] == "Example A"
    assert not any(u.startswith(("javascript:", "mailto:")) or "localhost" in u or "@" in u for u in urls)
    assert "http://127.0.0.1:9/x" not in urls


async def test_it_closes_pop_ups_and_refuses_downloads(web):
    result = await render(web.url("/popup"))

    assert result["ok"] is True
    assert "This page opens a window." in result["sources"][0]["content"]


async def test_two_concurrent_reads_get_separate_contexts_without_shared_cookies(web):
    first, second = await asyncio.gather(render(web.url("/cookie-set")), render(web.url("/js-only")))
    echo = await render(web.url("/cookie-echo"))

    assert first["ok"]
    assert second["ok"]
    assert "cookie: none" in echo["sources"][0]["content"]
    assert len({lease.id for lease in await leases()}) == 3
    assert {lease.state for lease in await leases()} == {BrowserLeaseState.CLOSED}


async def test_it_fails_with_a_timeout_and_still_closes_its_context(web, monkeypatch):
    monkeypatch.setattr(browser_read_module, "BUDGET", 2.0)

    result = await render(web.url("/slow-headers"))

    assert result == {"ok": False, "error": "timeout", "message": "The page could not be read within 2 s."}
    assert [lease.state for lease in await leases()] == [BrowserLeaseState.CLOSED]


async def test_cancelling_a_call_closes_only_its_own_context(web):
    context = tool_context(tool_call_id="slow")
    slow = asyncio.ensure_future(browser_read(context, {"url": web.url("/slow-headers")}))
    other = asyncio.ensure_future(render(web.url("/late"), wait_for_selector="#late"))
    while "/slow-headers" not in web.paths():
        await asyncio.sleep(0.05)

    slow.cancel()
    await browser_cleanup(CleanupRequest(context.conversation_id, context.turn_id, "slow", "cancelled"))

    with pytest.raises(asyncio.CancelledError):
        await slow
    assert (await other)["ok"] is True
    states = {lease.tool_call_id: lease.state for lease in await leases()}
    assert states == {"slow": BrowserLeaseState.CLOSED, "call-1": BrowserLeaseState.CLOSED}


async def test_a_context_that_opens_after_cancellation_is_closed_without_navigating(web, monkeypatch):
    opened = asyncio.Event()
    release = asyncio.Event()
    real_open = browser_module.BrowserPool.open

    def slow_open(self, call, browser, **options):
        async def late():
            opened.set()
            await release.wait()
            return await browser.new_context(**options)

        call.opening = asyncio.ensure_future(late())
        return call.opening

    monkeypatch.setattr(browser_module.BrowserPool, "open", slow_open)
    monkeypatch.setattr(browser_module, "CLOSE_TIMEOUT", 0.5)
    call = asyncio.ensure_future(render(web.url("/article")))
    await opened.wait()

    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    [lease] = await leases()
    assert lease.state == BrowserLeaseState.OPEN  # the context has not arrived yet
    release.set()
    for _ in range(100):
        if [x.state for x in await leases()] == [BrowserLeaseState.CLOSED]:
            break
        await asyncio.sleep(0.05)
    assert [x.state for x in await leases()] == [BrowserLeaseState.CLOSED]
    assert web.paths() == []
    monkeypatch.setattr(browser_module.BrowserPool, "open", real_open)


async def test_a_context_of_a_deleted_conversation_is_closed_without_navigating(web):
    result = await browser_read(tool_context(live=lambda: False), {"url": web.url("/article")})

    assert (result["ok"], result["error"]) == (False, "cancelled")
    assert web.paths() == []
    assert [lease.state for lease in await leases()] == [BrowserLeaseState.CLOSED]


async def test_deleting_the_conversation_closes_its_browsers_from_another_thread(web):
    context = tool_context()
    reading = asyncio.ensure_future(browser_read(context, {"url": web.url("/slow-headers")}))
    while "/slow-headers" not in web.paths():
        await asyncio.sleep(0.05)

    request = CleanupRequest(context.conversation_id, None, None, "deleted")
    await asyncio.to_thread(asyncio.run, browser_cleanup(request))

    result = await reading
    assert result["ok"] is False
    assert [lease.state for lease in await leases()] == [BrowserLeaseState.CLOSED]


async def test_a_cleanup_that_keeps_failing_is_reported_and_left_unresolved(web, monkeypatch):
    async def stuck(context) -> None:
        await asyncio.sleep(3600)

    enqueued: list[str] = []
    monkeypatch.setattr(browser_read_module, "_cleanup_enqueue", enqueued.append)
    # Only these two are put back at the end (the test's FakeDns stays until teardown).
    with monkeypatch.context() as closing:
        closing.setattr(browser_module, "context_close", stuck)
        closing.setattr(browser_module, "CLOSE_TIMEOUT", 0.3)

        result = await render(web.url("/article"))

        assert result["ok"] is False
        assert result["error"] == "cleanup_failed"
        assert result["result"]["ok"] is True  # what the call read is still there
        [lease] = await leases()
        assert enqueued == [lease.id]
        states = [await db(browser_lease_cleanup_run)(lease_id=lease.id, wait=0.3) for _ in range(3)]
        assert states == [BrowserLeaseState.OPEN, BrowserLeaseState.OPEN, BrowserLeaseState.CLEANUP_FAILED]
        assert await db(browser_lease_cleanup_run)(lease_id=lease.id, wait=0.3) == BrowserLeaseState.CLEANUP_FAILED


async def test_it_is_unavailable_with_the_install_command_when_no_chromium_is_found(settings, monkeypatch):
    configured = settings.CONFIG
    try:
        with monkeypatch.context() as missing:
            missing.setattr(browser_module, "DEBIAN_CHROMIUM", "/nonexistent/chromium")
            missing.setenv("PLAYWRIGHT_BROWSERS_PATH", "/nonexistent")
            chromium_path(refresh=True)
            assert await browser_available(tool_context()) == INSTALL_HINT
            assert "playwright install chromium" in INSTALL_HINT
            settings.CONFIG = dataclasses.replace(settings.CONFIG, chromium="/nonexistent/browser")
            chromium_path(refresh=True)
            assert "FLAREBOT_CHROMIUM" in (await browser_available(tool_context()) or "")
    finally:
        settings.CONFIG = configured
        chromium_path(refresh=True)
        assert chromium_path() is not None  # the next tests find Chromium again


async def test_leases_never_cascade_with_a_conversation():
    field = BrowserLease._meta.get_field("conversation_id")

    assert field.get_internal_type() == "UUIDField"
    assert not field.is_relation
    lease = await db(BrowserLease.objects.create)(
        conversation_id=uuid.uuid4(),
        turn_id=uuid.uuid4(),
        tool_call_id="c",
        holder="h:1:1",
        expires_at="2030-01-01T00:00Z",
    )
    assert lease.state == BrowserLeaseState.OPEN
