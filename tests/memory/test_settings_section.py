"""The Memory section of /settings/ as served: limits from the server, and never a fact in the HTML."""

from __future__ import annotations

import re

from memory import services


def test_the_section_carries_the_limits_from_the_server(owner_client):
    content = owner_client.get("/settings/").content.decode()

    assert 'data-max-facts="200"' in content
    assert 'data-max-length="1000"' in content
    assert "/static/flarebot/settings.js" in content


def test_no_fact_is_in_the_page_only_the_api_returns_them(owner_client):
    services.fact_create(content="The door code is 4711.")

    content = owner_client.get("/settings/").content.decode()

    assert "4711" not in content
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", content) is None  # no inline script
    assert " style=" not in content
    assert [f["content"] for f in owner_client.get("/api/memories/").json()["memories"]] == ["The door code is 4711."]


def test_the_section_says_what_deleting_a_fact_does(owner_client):
    content = " ".join(owner_client.get("/settings/").content.decode().split())

    assert "Deleting a fact stops it from reaching the model, while older transcripts may still quote it." in content
