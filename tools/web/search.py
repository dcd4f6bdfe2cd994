"""The web_search tool: one hosted web search through the OpenAI Responses API.

Whatever model the conversation uses, the search runs on the owner's OpenAI key with a
fixed small model (`FLAREBOT_SEARCH_MODEL`): the hosted `web_search` tool forced, at most
one hosted tool call, low search context and reasoning effort, at most 2,000 output
tokens, nothing stored, no retries and no fallback. One 60 s deadline covers the request
and its body, which may be at most 256,000 bytes (counted by the transport, error bodies
included). Cancelling stops reading the body; the search may still be billed.

Sources come only from the answer's citation annotations and the search action's
sources, validated and deduplicated, at most five; the answer's text is returned as a
labelled model synthesis, not as evidence. Every failure (key refused, no access,
billing, rate limit, malformed or incomplete answer, timeout) is a safe error, never an
empty success: an empty source list is accepted only from a search that completed and
whose answer supplied the list (no list and no citation is the failure `no_sources`).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings

from flarebot.core.crypto import Secret
from tools.kit import object_schema, refusal
from tools.registry import Effect, KeyMissing, Tool, ToolContext
from tools.web.extract import TITLE_MAX, utf16_cut
from tools.web.sources import SourceJson, citable_url, source_record, summary_of

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

DEADLINE = 60.0
QUERY_MAX = 500
RESPONSE_MAX = 256_000
SUMMARY_MAX = 6_000
SOURCES_MAX = 5
OUTPUT_TOKENS = 2_000
SUMMARY_LABEL = "Model synthesis of the search results: not a quotation and not proof that any page says this."
MISSING_KEY = "Add an OpenAI API key in Settings to search the web."

INPUT_SCHEMA = object_schema(
    {"query": {"type": "string", "minLength": 1, "maxLength": QUERY_MAX, "description": "What to search for."}}
)


def search_request(query: str) -> dict[str, Any]:
    """Return the Responses API request of one search (the tests assert this body)."""
    return {
        "model": settings.CONFIG.search_model,
        "input": query,
        "tools": [{"type": "web_search", "search_context_size": "low"}],
        "tool_choice": {"type": "allowed_tools", "mode": "required", "tools": [{"type": "web_search"}]},
        "max_tool_calls": 1,
        "reasoning": {"effort": "low"},
        "max_output_tokens": OUTPUT_TOKENS,
        "store": False,
        "include": ["web_search_call.action.sources"],
    }


async def search_available(context: ToolContext) -> str | None:
    key = await context.provider_key("openai")
    return None if isinstance(key, Secret) else _key_problem(key)


def _key_problem(missing: KeyMissing) -> str:
    return MISSING_KEY if missing.state == "missing" else missing.message


async def web_search(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    """Search the web once and return the cited sources and a labelled summary."""
    key = await context.provider_key("openai")
    if not isinstance(key, Secret):
        return refusal("unavailable", _key_problem(key))
    # The SDK loads on first use (web and beat never need it), on a thread: an import on
    # the worker's event loop would stop every answer it streams until it finished.
    await asyncio.to_thread(importlib.import_module, "openai")
    import openai

    from tools.web.bounded_transport import BoundedTransport, ResponseTooLarge

    query = data["query"]
    client = openai.AsyncOpenAI(
        api_key=key.reveal(),
        base_url=settings.CONFIG.openai_base_url,
        max_retries=0,
        timeout=DEADLINE,
        http_client=openai.DefaultAsyncHttpxClient(transport=BoundedTransport(RESPONSE_MAX)),
    )
    try:
        async with asyncio.timeout(DEADLINE):
            raw = await client.responses.with_raw_response.create(
                **search_request(query), extra_headers={"Accept-Encoding": "identity"}
            )
            body = raw.content
    except TimeoutError:
        return refusal("timeout", f"The web search did not answer within {DEADLINE:g} s.")
    except ResponseTooLarge:
        return _too_large_failure()
    except openai.APIError as error:
        return _api_failure(error)
    finally:
        await client.close()
    return _answer(query, body)


def _too_large(error: BaseException) -> bool:
    from tools.web.bounded_transport import ResponseTooLarge

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ResponseTooLarge):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _too_large_failure() -> dict[str, Any]:
    return refusal("too_large", f"The search answer was larger than {RESPONSE_MAX:,} bytes.")


def _api_failure(error: openai.APIError) -> dict[str, Any]:
    """Map an SDK error to a safe, classified failure (never its body, never the key)."""
    import openai  # the SDK loads on first use: web and beat never need it

    if _too_large(error):
        return _too_large_failure()
    if isinstance(error, openai.APITimeoutError):
        return refusal("timeout", f"The web search did not answer within {DEADLINE:g} s.")
    if isinstance(error, openai.APIConnectionError):
        return refusal("unreachable", "The search service could not be reached.")
    if isinstance(error, openai.AuthenticationError):
        return refusal("key_refused", "OpenAI refused the API key. Check the OpenAI key in Settings.")
    code = error.code if isinstance(error.code, str) else ""
    status = error.status_code if isinstance(error, openai.APIStatusError) else 0
    if status == 402 or code in ("insufficient_quota", "billing_hard_limit_reached", "billing_not_active"):
        return refusal("billing", "The OpenAI account has no credit for web search (billing or quota).")
    if isinstance(error, openai.RateLimitError):
        return refusal("rate_limited", "OpenAI's rate limit was reached; try the search again later.")
    if isinstance(error, openai.PermissionDeniedError | openai.NotFoundError):
        return refusal("no_access", "This OpenAI key has no access to web search with the search model.")
    if isinstance(error, openai.BadRequestError):
        return refusal("rejected", "OpenAI rejected the search request.")
    if status >= 500:
        return refusal("provider_error", "The search service had an error; try again later.")
    logger.warning("web search failed with HTTP %s", status)
    return refusal("provider_error", "The web search failed.")


def _answer(query: str, body: bytes) -> dict[str, Any]:
    malformed = refusal("malformed", "The search service sent an answer that could not be read.")
    try:
        response = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return malformed
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        return malformed
    status = response.get("status")
    if status == "incomplete":
        return refusal("incomplete", "The search answer was cut off before it completed.")
    if status != "completed":
        return refusal("incomplete", "The search did not complete.")
    items = [item for item in response["output"] if isinstance(item, dict)]
    searches = [item for item in items if item.get("type") == "web_search_call"]
    if not any(item.get("status") == "completed" for item in searches):
        return refusal("incomplete", "The search service answered without completing a search.")
    texts: list[str] = []
    cited: list[tuple[Any, Any]] = []
    for item in items:
        if item.get("type") != "message" or not isinstance(item.get("content"), list):
            continue
        for part in item["content"]:
            if not isinstance(part, dict) or part.get("type") != "output_text":
                continue
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            for note in part.get("annotations") or []:
                if isinstance(note, dict) and note.get("type") == "url_citation":
                    cited.append((note.get("url"), note.get("title")))
    listed = False  # whether the provider supplied a source list at all (even an empty one)
    for item in searches:
        action = item.get("action")
        if isinstance(action, dict) and action.get("type") == "search" and isinstance(action.get("sources"), list):
            listed = True
            for found in action["sources"]:
                if isinstance(found, dict) and found.get("type", "url") == "url":
                    cited.append((found.get("url"), ""))
    if not listed and not cited:
        # An empty list is an answer only when the provider said so; no list at all is not one.
        return refusal("no_sources", "The search service answered without a list of sources.")
    sources = _sources(cited)
    if cited and not sources:
        # Sources were given, and the URL checks refused every one: nothing is left to cite.
        return refusal("no_sources", "The search gave no source that may be cited (every address was refused).")
    summary, cut = utf16_cut("\n\n".join(texts).strip(), SUMMARY_MAX)
    return {
        "ok": True,
        "kind": "search",
        "query": query,
        "generated_summary": {"label": SUMMARY_LABEL, "text": summary, "truncated": cut},
        "sources": sources,
    }


def _sources(cited: list[tuple[Any, Any]]) -> list[SourceJson]:
    """Validated, deduplicated search sources (first mention wins, titles from citations)."""
    sources: dict[str, SourceJson] = {}
    for raw_url, raw_title in cited:
        url = citable_url(raw_url)
        if url is None:
            continue
        title = " ".join(raw_title.split()) if isinstance(raw_title, str) else ""
        if url in sources:
            if title and not sources[url]["title"]:
                sources[url]["title"] = utf16_cut(title, TITLE_MAX)[0]
            continue
        if len(sources) == SOURCES_MAX:
            continue
        sources[url] = source_record(
            kind="search", title=utf16_cut(title, TITLE_MAX)[0], requested_url=url, final_url=url
        )
    return list(sources.values())


WEB_SEARCH = Tool(
    name="web_search",
    description=(
        "Search the web once and get up to five cited sources with a short model-written summary. "
        "The summary is a synthesis, not evidence: read the sources with read_url (or browser_read) "
        "before relying on them, and cite exact final URLs."
    ),
    input_schema=INPUT_SCHEMA,
    run=web_search,
    deadline=DEADLINE + 2,
    effect=Effect.READ,
    label="Searching the web",
    summarize=summary_of,
    available=search_available,
    reads_untrusted=True,
    cites_sources=True,
)
