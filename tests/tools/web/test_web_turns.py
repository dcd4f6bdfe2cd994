"""The web tools inside real turns: what the model is sent, the tool parts, and the cards."""

from __future__ import annotations

import json

import pytest

from conversations.instructions import DEFAULT_INSTRUCTIONS, PRODUCT_RULES, system_prompt
from conversations.model_settings import key_unreadable_message, provider_key_set
from conversations.models import ProviderKey
from tests.support.engine import (
    OPENAI_KEY,
    ask,
    assistant_parts,
    events,
    new_conversation,
    orm,
    tool_parts,
    tool_results_sent,
)
from tests.support.fake_providers import Call, Text
from tools.selectors import activity_page
from tools.web.search import MISSING_KEY

pytestmark = pytest.mark.django_db(transaction=True)


async def cards(conversation_id) -> list[dict]:
    return [e.data["activity"] for e in await events(conversation_id) if e.kind == "activity.updated"]


async def test_a_read_page_is_a_source_in_the_tool_part_and_only_its_host_on_the_card(
    anthropic, fake_providers, cancels, web
):
    url = web.url("/article")
    fake_providers.script([Call("c1", "read_url", {"url": url})], [Text("It sells fish and chips.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "What does the article say?", cancels)

    assert turn.status == "completed"
    [part] = tool_parts(await assistant_parts(turn.id))
    [source] = part["output"]["sources"]
    assert (part["status"], source["final_url"], source["kind"]) == ("succeeded", url, "page")
    assert "Fish & Chips" in source["content"]
    assert tool_results_sent(anthropic, fake_providers.requests[1].body)["c1"] == part["output"]
    final = (await cards(conversation_id))[-1]
    expected = ("Reading a page", "succeeded", f"127.0.0.1:{web.port}")
    assert (final["label"], final["status"], final["summary"]) == expected
    shown = json.dumps(await cards(conversation_id))
    assert "/article" not in shown
    assert "Fish" not in shown


async def test_the_model_is_told_to_cite_final_urls_and_to_distrust_page_text(anthropic, fake_providers, cancels):
    conversation_id = await new_conversation()

    await ask(conversation_id, "Hello", cancels)

    system = fake_providers.requests[0].body["system"]
    assert system == system_prompt(DEFAULT_INSTRUCTIONS)
    assert "final_url" in PRODUCT_RULES
    assert "untrusted evidence" in PRODUCT_RULES
    offered = {tool["name"] for tool in fake_providers.requests[0].body["tools"]}
    assert {"web_search", "read_url", "browser_read"} <= offered


async def test_web_search_without_an_openai_key_is_unavailable_and_says_what_to_configure(
    anthropic, fake_providers, cancels
):
    fake_providers.script([Call("c1", "web_search", {"query": "news"})], [Text("I cannot search.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Search the news.", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["status"] == "unavailable"
    assert part["output"]["message"] == MISSING_KEY
    final = (await cards(conversation_id))[-1]
    assert (final["label"], final["status"], final["summary"]) == ("Searching the web", "unavailable", MISSING_KEY)
    assert [r.path for r in fake_providers.requests] == ["/v1/messages", "/v1/messages"]


async def test_web_search_with_an_openai_key_that_no_longer_opens_asks_for_it_again(anthropic, fake_providers, cancels):
    await orm(provider_key_set)(provider="openai", key=OPENAI_KEY)
    await orm(ProviderKey.objects.filter(provider="openai").update)(sealed=b"\x00" * 64)  # a changed secret's view
    fake_providers.script([Call("c1", "web_search", {"query": "news"})], [Text("I cannot search.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Search the news.", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    assert part["status"] == "unavailable"
    assert part["output"]["message"] == key_unreadable_message("openai")
    assert "enter it again in Settings" in part["output"]["message"]
    final = (await cards(conversation_id))[-1]
    assert final["summary"] == key_unreadable_message("openai")


async def test_a_refused_url_fails_the_call_with_a_classified_message(anthropic, fake_providers, cancels, web):
    fake_providers.script(
        [Call("c1", "read_url", {"url": "http://169.254.169.254/latest/meta-data/"})], [Text("Refused.")]
    )
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Read the metadata.", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    assert (part["status"], part["output"]["error"], part["output"]["rule"]) == ("failed", "refused", "metadata")
    final = (await cards(conversation_id))[-1]
    assert final["summary"] == "The URL names a cloud metadata address, which Flarebot may not reach."
    assert final["hint"] == ""  # no operator should allow it


async def test_a_refused_url_names_its_rule_and_only_the_owners_card_says_what_to_allow(
    anthropic, fake_providers, cancels, web
):
    # 127.0.0.1 is allowlisted with the fixture server's port (tests/settings.py); port 9 is not,
    # and nothing is connected to: the URL is refused before any connection.
    fake_providers.script([Call("c1", "read_url", {"url": "http://127.0.0.1:9/"})], [Text("Refused.")])
    conversation_id = await new_conversation()

    turn = await ask(conversation_id, "Read the local service.", cancels)

    [part] = tool_parts(await assistant_parts(turn.id))
    said = (
        "The operator allows this host on another port only; port 9 is not allowed."
        " The URL names a loopback address, which Flarebot may not reach."
    )
    assert part["output"] == {"ok": False, "error": "refused", "rule": "port", "redirect": False, "message": said}
    sent = tool_results_sent(anthropic, fake_providers.requests[1].body)["c1"]
    assert sent == part["output"]
    assert "FLAREBOT_NETWORK_ALLOW" not in json.dumps(fake_providers.requests[1].body)
    final = (await cards(conversation_id))[-1]
    assert (final["status"], final["summary"]) == ("failed", said)
    assert final["hint"].startswith("An operator can allow exactly this host and port with ")
    assert "FLAREBOT_NETWORK_ALLOW=127.0.0.1:9 " in final["hint"]
    [stored] = (await orm(activity_page)(conversation_id=conversation_id, before=None)).activities
    assert stored["hint"] == final["hint"]
