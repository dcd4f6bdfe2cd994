"""read_url against the loopback fixture web server, reached only through the allowlist."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib

import pytest

from tests.support.tool_context import tool_context
from tools.web import read_url as read_url_module
from tools.web.read_url import read_url


async def read(url: str) -> dict:
    return await read_url(tool_context(), {"url": url})


async def test_it_returns_the_visible_text_of_html_with_entities_decoded(web):
    result = await read(web.url("/article"))

    assert result["ok"] is True
    [source] = result["sources"]
    text = source["content"]
    assert source["title"] == "Café & Bar \u2013 Notes"
    assert "Fish & Chips" in text
    assert 'Price: 5 € <cheap> "quoted" 🐟' in text
    assert "first item\nsecond item" in text
    assert "Last paragraph." in text
    for hidden in ("SCRIPT-TEXT", "color: red", "About us", "Password", "Sign in", "Enable JavaScript", "HIDDEN-TEXT"):
        assert hidden not in text
    assert "&amp;" not in text
    assert "&euro;" not in text


async def test_it_keeps_a_source_record_with_a_url_derived_id(web):
    url = web.url("/redirect-relative")

    first = (await read(url))["sources"][0]
    second = (await read(url))["sources"][0]

    final = web.url("/article")
    assert first["kind"] == "page"
    assert (first["requested_url"], first["final_url"]) == (url, final)
    assert first["id"] == second["id"] == hashlib.sha256(final.encode()).hexdigest()[:16]
    assert first["fetched_at"].endswith("Z")
    assert first["truncated"] is False


async def test_it_keeps_markdown_and_plain_text_as_they_are(web):
    markdown = (await read(web.url("/notes.md")))["sources"][0]["content"]
    plain = (await read(web.url("/plain.txt")))["sources"][0]["content"]

    assert markdown == "# Notes\n\n* one &amp; two\n\n    code block"
    assert plain == "Plain text.\nSecond line."


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/doc.pdf", "The page is a PDF, which read_url cannot read."),
        ("/image.png", "read_url reads HTML, Markdown and plain text, not image/png."),
        ("/download", "read_url reads HTML, Markdown and plain text, not application/octet-stream."),
    ],
)
async def test_it_fails_explicitly_on_pdf_and_binary_types(web, path, message):
    result = await read(web.url(path))

    assert result == {"ok": False, "error": "unsupported_type", "message": message}


async def test_it_fails_on_a_status_outside_2xx(web):
    result = await read(web.url("/missing"))

    assert result == {"ok": False, "error": "http_status", "message": "The page answered with HTTP status 404."}


async def test_it_stops_downloading_at_256000_bytes_and_marks_the_text_truncated(web):
    result = await read(web.url("/big"))

    [source] = result["sources"]
    assert source["truncated"] is True
    assert len(source["content"]) <= 16_000
    assert source["content"].startswith("word word")


async def test_it_returns_at_most_16000_utf16_code_units(web):
    [source] = (await read(web.url("/long-text")))["sources"]

    assert source["content"] == "é" * 16_000
    assert source["truncated"] is True


async def test_it_fails_with_a_timeout_when_the_body_is_too_slow(web, monkeypatch):
    monkeypatch.setattr(read_url_module, "DEADLINE", 0.5)

    result = await read(web.url("/slow"))

    assert result == {"ok": False, "error": "timeout", "message": "The page did not arrive within 0.5 s."}


async def test_it_stops_reading_when_cancelled(web):
    call = asyncio.ensure_future(read(web.url("/slow")))
    while "/slow" not in web.paths():
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)

    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call
    assert await asyncio.to_thread(web.slow_gone.wait, 10)


async def test_it_refuses_a_redirect_to_a_private_address(web, dns):
    result = await read(web.url("/redirect-private"))

    assert result["ok"] is False
    assert result["error"] == "refused"
    assert result["message"].startswith("The page redirected somewhere Flarebot may not go:")
    assert dns.asked == []


async def test_it_refuses_a_redirect_to_another_port_of_the_allowlisted_host(web):
    result = await read(web.url("/redirect-other-port"))

    assert (result["ok"], result["error"]) == (False, "refused")
    assert web.paths(web.other_port) == []


async def test_it_refuses_a_redirect_to_another_spelling_of_the_allowlisted_host(web):
    result = await read(web.url("/redirect-localhost"))

    assert (result["ok"], result["error"]) == (False, "refused")
    assert web.paths() == ["/redirect-localhost"]


async def test_it_refuses_a_redirect_to_a_name_that_resolves_to_a_metadata_address(web, dns):
    dns.add("metadata.example.org", "93.184.215.14", "169.254.169.254")

    result = await read(web.url("/redirect-metadata-name"))

    assert result["ok"] is False
    assert "a cloud metadata address" in result["message"]
    assert dns.asked == ["metadata.example.org"]


async def test_it_follows_at_most_five_redirects(web):
    result = await read(web.url("/redirect-loop"))

    assert result == {"ok": False, "error": "redirects", "message": "The page redirected more than 5 times."}
    assert web.paths() == ["/redirect-loop"] * 6


async def test_it_refuses_a_name_that_resolves_to_a_public_then_a_private_address(web, dns):
    dns.add("mixed.example.org", "93.184.215.14", "127.0.0.1")

    result = await read(f"http://mixed.example.org:{web.port}/article")

    assert result["ok"] is False
    assert "a loopback address" in result["message"]
    assert web.paths() == []


async def test_it_connects_to_the_checked_address_once_and_keeps_the_host_header(web, dns, settings):
    settings.CONFIG = dataclasses.replace(
        settings.CONFIG, network_allow=(*settings.CONFIG.network_allow, ("wiki.example.org", web.port))
    )
    dns.add("wiki.example.org", "127.0.0.1")

    result = await read(f"http://wiki.example.org:{web.port}/article")

    assert result["ok"] is True
    assert dns.asked == ["wiki.example.org"]
    assert web.host_headers == [f"wiki.example.org:{web.port}"]


async def test_it_refuses_an_ip_literal_that_is_not_allowlisted(web):
    result = await read(web.other_url("/secret"))

    assert (result["ok"], result["error"]) == (False, "refused")
    assert web.paths(web.other_port) == []


async def test_it_names_the_rule_for_the_model_and_tells_only_the_owner_what_to_allow(web):
    # 127.0.0.1 is allowlisted with the fixture server's port (tests/settings.py): port 9 is not.
    hints: list[str] = []

    result = await read_url(tool_context(hints=hints), {"url": "http://127.0.0.1:9/"})

    assert result == {
        "ok": False,
        "error": "refused",
        "rule": "port",
        "redirect": False,
        "message": "The operator allows this host on another port only; port 9 is not allowed."
        " The URL names a loopback address, which Flarebot may not reach.",
    }
    [hint] = hints
    assert "FLAREBOT_NETWORK_ALLOW=127.0.0.1:9 " in hint
    assert f"{web.port}" not in hint  # nothing of the allowlist itself


async def test_it_names_the_rule_of_a_redirect_and_the_entry_of_where_it_went(web, dns):
    hints: list[str] = []

    result = await read_url(tool_context(hints=hints), {"url": web.url("/redirect-private")})

    assert result == {
        "ok": False,
        "error": "refused",
        "rule": "private",
        "redirect": True,
        "message": "The page redirected somewhere Flarebot may not go:"
        " The URL names a private address, which Flarebot may not reach.",
    }
    assert ["FLAREBOT_NETWORK_ALLOW=10.0.0.1:80 " in hint for hint in hints] == [True]
    assert dns.asked == []


async def test_it_names_the_rule_of_a_redirect_to_a_name_that_resolves_to_a_refused_address(web, dns):
    dns.add("metadata.example.org", "169.254.169.254")
    hints: list[str] = []

    result = await read_url(tool_context(hints=hints), {"url": web.url("/redirect-metadata-name")})

    assert (result["rule"], result["redirect"]) == ("metadata", True)
    assert result["message"] == (
        "The page redirected somewhere Flarebot may not go:"
        " The host name resolves to a cloud metadata address, which Flarebot may not reach."
    )
    assert hints == []  # no operator should allow a metadata address
