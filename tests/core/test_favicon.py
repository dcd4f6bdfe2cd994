"""The site icon: what the pages link to and what browsers ask for at /favicon.ico."""

from __future__ import annotations

import re

import pytest
from django.test import Client

ICO_MAGIC = b"\x00\x00\x01\x00"


def fetched(client: Client, path: str) -> tuple[int, str, str, bytes]:
    response = client.get(path)
    body = response.getvalue()
    return response.status_code, response["Content-Type"], response.get("Cache-Control", ""), body


@pytest.mark.django_db
def test_it_serves_favicon_ico_to_anyone_before_any_owner_exists_and_lets_it_be_cached(anonymous_client):
    status, content_type, cache_control, body = fetched(anonymous_client, "/favicon.ico")

    assert status == 200
    assert content_type == "image/x-icon"
    assert body.startswith(ICO_MAGIC)
    assert re.search(r"max-age=[1-9]", cache_control)
    assert "no-store" not in cache_control


@pytest.mark.parametrize("path", ["/", "/login/"])
def test_it_links_every_page_to_the_icon_it_serves(owner, owner_client, anonymous_client, path):
    client = owner_client if path == "/" else anonymous_client
    page = client.get(path)

    assert page.status_code == 200
    [href] = re.findall(r'<link rel="icon" href="([^"]+)"', page.content.decode())
    assert fetched(client, href)[:2] == (200, "image/x-icon")
