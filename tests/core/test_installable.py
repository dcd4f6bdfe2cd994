"""The installable web app: the manifest, its icons, the service worker and the offline page, as served."""

from __future__ import annotations

import json
import re
import struct

import pytest
from django.test import Client

from flarebot.core.middleware import CONTENT_SECURITY_POLICY

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def body_of(response) -> bytes:
    return response.getvalue()


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(PNG_MAGIC)
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.django_db
def test_it_serves_the_manifest_to_anyone_with_its_icons(anonymous_client: Client):
    response = anonymous_client.get("/manifest.webmanifest")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/manifest+json")
    manifest = json.loads(body_of(response))
    assert manifest["name"] == "Flarebot"
    assert manifest["start_url"] == "/"
    assert manifest["scope"] == "/"
    assert manifest["display"] == "standalone"
    assert re.fullmatch(r"#[0-9a-f]{6}", manifest["theme_color"])
    assert re.fullmatch(r"#[0-9a-f]{6}", manifest["background_color"])
    sizes = set()
    for icon in manifest["icons"]:
        fetched = anonymous_client.get(icon["src"])
        assert fetched.status_code == 200, icon["src"]
        assert fetched["Content-Type"] == "image/png"
        width, height = png_size(body_of(fetched))
        assert icon["sizes"] == f"{width}x{height}"
        sizes.add((width, icon["purpose"]))
    assert sizes == {(192, "any"), (512, "any"), (192, "maskable"), (512, "maskable")}


@pytest.mark.django_db
def test_it_serves_the_service_worker_from_the_root_and_it_never_handles_the_api(anonymous_client: Client):
    response = anonymous_client.get("/sw.js")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    source = body_of(response).decode()
    passed = re.search(r"const PASSED_THROUGH = \[([^\]]*)\]", source)
    assert passed is not None
    assert {'"/api/"', '"/ws/"'} <= {part.strip() for part in passed.group(1).split(",")}
    # What it keeps for offline use exists, and none of it is private.
    shell = re.search(r"const SHELL = \[([^\]]*)\]", source, re.S)
    assert shell is not None
    kept = [*re.findall(r'"(/[^"]*)"', shell.group(1)), "/offline.html"]
    for path in kept:
        assert not path.startswith(("/api/", "/ws/")), path
        assert anonymous_client.get(path).status_code == 200, path


@pytest.mark.django_db
def test_it_serves_the_offline_page_to_anyone(anonymous_client: Client):
    response = anonymous_client.get("/offline.html")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert "You are offline" in body_of(response).decode()


@pytest.mark.parametrize("path", ["/", "/login/", "/settings/"])
def test_every_page_links_the_manifest_and_registers_the_worker(owner, owner_client, anonymous_client, path):
    client = anonymous_client if path == "/login/" else owner_client
    page = client.get(path).content.decode()

    assert '<link rel="manifest" href="/manifest.webmanifest">' in page
    assert re.search(r'<script type="module" src="/static/flarebot/install\.js"></script>', page)
    assert '<meta name="theme-color" content="#c2410c">' in page


def test_the_pages_policy_lets_the_worker_and_the_manifest_load():
    directives = dict(part.strip().split(" ", 1) for part in CONTENT_SECURITY_POLICY.split(";"))
    # Neither worker-src nor manifest-src is set: both fall back to default-src 'self'.
    assert directives["default-src"] == "'self'"
    assert "worker-src" not in directives
    assert "manifest-src" not in directives
