"""web_search against the emulated OpenAI Responses API (tests/support/fake_providers.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from tests.support.fake_providers import HttpError, RawAnswer, Search, SlowAnswer
from tests.support.tool_context import tool_context
from tools.web import search as search_module
from tools.web.search import MISSING_KEY, SUMMARY_LABEL, search_available, web_search

KEY = "sk-proj-Search7Key8For9Tests0aBcD"


async def search(query: str = "tallest tree in Europe", *, keys: dict[str, str] | None = None) -> dict:
    return await web_search(tool_context(keys={"openai": KEY} if keys is None else keys), {"query": query})


def error(status: int, message: str, code: str | None = None) -> HttpError:
    return HttpError(status, {"error": {"message": message, "code": code}})


def searches(fake_providers) -> list:
    return [r for r in fake_providers.requests if r.path == "/v1/responses"]


async def test_it_sends_one_forced_low_budget_unstored_search_with_the_owners_key(fake_providers):
    fake_providers.search(Search(citations=[("https://example.org/trees", "Trees")]))

    await search("tallest tree in Europe")

    [request] = searches(fake_providers)
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body == {
        "model": "gpt-5.4-mini",
        "input": "tallest tree in Europe",
        "tools": [{"type": "web_search", "search_context_size": "low"}],
        "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search"}]},
        "max_tool_calls": 1,
        "reasoning": {"effort": "low"},
        "max_output_tokens": 2000,
        "store": False,
        "include": ["web_search_call.action.sources"],
    }


async def test_it_uses_the_operators_search_model(fake_providers, settings):
    settings.CONFIG = dataclasses.replace(settings.CONFIG, search_model="gpt-search-special")

    await search()

    assert searches(fake_providers)[0].body["model"] == "gpt-search-special"


async def test_it_returns_cited_sources_and_a_labelled_summary(fake_providers):
    fake_providers.search(
        Search(
            text="The tallest tree is a eucalyptus.",
            citations=[
                ("https://example.org/trees?utm_source=openai", "  Tall   trees  "),
                ("https://news.example.com/a", "A"),
            ],
            sources=["https://example.org/trees?utm_source=openai", "https://wiki.example.net/Eucalyptus"],
        )
    )

    result = await search()

    assert result["ok"] is True
    assert result["generated_summary"] == {
        "label": SUMMARY_LABEL,
        "text": "The tallest tree is a eucalyptus.",
        "truncated": False,
    }
    assert [(s["final_url"], s["title"], s["kind"], s["content"]) for s in result["sources"]] == [
        ("https://example.org/trees?utm_source=openai", "Tall trees", "search", ""),
        ("https://news.example.com/a", "A", "search", ""),
        ("https://wiki.example.net/Eucalyptus", "", "search", ""),
    ]
    assert len({s["id"] for s in result["sources"]}) == 3


async def test_it_keeps_at_most_five_valid_deduplicated_sources(fake_providers):
    hostile = [
        "http://127.0.0.1/admin",
        "http://localhost/",
        "https://user:pw@example.org/",
        "javascript:alert(1)",
        "file:///etc/passwd",
        "http://169.254.169.254/latest/meta-data/",
        "not a url",
        "https://example.org/one#section",
    ]
    good = [f"https://example.org/{name}" for name in ("one", "two", "three", "four", "five", "six")]
    fake_providers.search(Search(citations=[(url, "t") for url in hostile], sources=good))

    result = await search()

    assert [s["final_url"] for s in result["sources"]] == good[:5]


async def test_it_accepts_no_sources_only_from_a_completed_search(fake_providers):
    fake_providers.search(Search(citations=[], sources=[]))

    result = await search()

    assert (result["ok"], result["sources"]) == (True, [])


async def test_a_completed_search_that_supplied_no_source_list_is_a_failure_not_an_empty_success(fake_providers):
    fake_providers.search(Search(citations=[], sources=None))

    result = await search()

    assert result == {
        "ok": False,
        "error": "no_sources",
        "message": "The search service answered without a list of sources.",
    }


async def test_a_search_whose_every_source_the_url_checks_refused_is_a_failure(fake_providers):
    hostile = ["http://127.0.0.1/admin", "http://169.254.169.254/latest/meta-data/", "javascript:alert(1)"]
    fake_providers.search(Search(text="Found it.", citations=[(url, "t") for url in hostile], sources=hostile))

    result = await search()

    assert result == {
        "ok": False,
        "error": "no_sources",
        "message": "The search gave no source that may be cited (every address was refused).",
    }


async def test_citations_without_the_action_list_are_still_sources(fake_providers):
    fake_providers.search(Search(citations=[("https://example.org/a", "A")], sources=None))

    result = await search()

    assert [s["final_url"] for s in result["sources"]] == ["https://example.org/a"]


async def test_it_bounds_the_summary_to_6000_characters(fake_providers):
    fake_providers.search(Search(text="x" * 9000, citations=[("https://example.org/", "E")]))

    summary = (await search())["generated_summary"]

    assert (len(summary["text"]), summary["truncated"]) == (6000, True)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (Search(status="incomplete", incomplete_reason="max_output_tokens"), "incomplete"),
        (Search(status="failed"), "incomplete"),
        (Search(search_status="failed"), "incomplete"),
        (Search(searched=False), "incomplete"),
        (error(401, f"Incorrect API key provided: {KEY}", "invalid_api_key"), "key_refused"),
        (error(403, "Project does not have access", "model_not_found"), "no_access"),
        (error(404, "The model does not exist", "model_not_found"), "no_access"),
        (error(429, "Slow down", "rate_limit_exceeded"), "rate_limited"),
        (error(429, "You exceeded your quota", "insufficient_quota"), "billing"),
        (error(402, "Payment required"), "billing"),
        (error(400, "Bad tool_choice"), "rejected"),
        (error(500, "Internal error SECRET-BODY"), "provider_error"),
        (RawAnswer(b"{not json"), "malformed"),
        (RawAnswer(b"<html>proxy error</html>", content_type="text/html"), "malformed"),
        (RawAnswer(json.dumps({"status": "completed"}).encode()), "malformed"),
        (RawAnswer(b'{"padding": "' + b"x" * 300_000 + b'"}'), "too_large"),
    ],
)
async def test_it_turns_each_failure_into_a_safe_error_never_an_empty_success(fake_providers, answer, error):
    fake_providers.search(answer)

    result = await search()

    assert result["ok"] is False
    assert result["error"] == error
    assert KEY not in json.dumps(result)
    assert "SECRET-BODY" not in json.dumps(result)
    assert len(searches(fake_providers)) == 1  # no retries, no fallback


async def test_it_fails_with_a_timeout_when_the_answer_is_too_slow(fake_providers, monkeypatch):
    monkeypatch.setattr(search_module, "DEADLINE", 0.5)
    fake_providers.search(SlowAnswer(seconds=10))

    result = await search()

    assert (result["ok"], result["error"]) == (False, "timeout")
    assert len(searches(fake_providers)) == 1


async def test_it_stops_reading_the_answer_when_cancelled(fake_providers):
    fake_providers.search(SlowAnswer(seconds=10))
    call = asyncio.ensure_future(search())
    while not searches(fake_providers):
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)

    call.cancel()

    with pytest.raises(asyncio.CancelledError):
        await call
    [request] = searches(fake_providers)
    for _ in range(100):
        if request.ended is not None:
            break
        await asyncio.sleep(0.05)
    assert request.disconnected


async def test_it_is_unavailable_without_an_openai_key(fake_providers):
    assert await search_available(tool_context(keys={})) == MISSING_KEY
    assert await search_available(tool_context(keys={"openai": KEY})) is None
    assert (await search(keys={})) == {"ok": False, "error": "unavailable", "message": MISSING_KEY}
    assert searches(fake_providers) == []
