"""The client's address: the socket peer, or what trusted proxies say it was."""

from __future__ import annotations

import ipaddress

import pytest
from django.conf import settings
from django.test import Client, RequestFactory

from flarebot.core.clients import client_address
from flarebot.core.models import SignInFailure
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

PROXY = "172.30.80.1"


@pytest.fixture
def behind_proxy(settings):
    settings.FLAREBOT_TRUSTED_PROXIES = (ipaddress.ip_network("172.30.80.0/24"), ipaddress.ip_network("10.0.0.7"))


def request(peer: str | None, *forwarded: str):
    made = RequestFactory().get("/", REMOTE_ADDR=peer or "")
    if forwarded:
        made.META["HTTP_X_FORWARDED_FOR"] = ", ".join(forwarded)
    return made


def scope(peer: str | None, *forwarded: str) -> dict:
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    return {"type": "websocket", "client": [peer, 50000] if peer else None, "headers": headers}


def test_it_takes_the_peer_and_ignores_x_forwarded_for_without_trusted_proxies():
    assert settings.FLAREBOT_TRUSTED_PROXIES == ()

    assert client_address(request("192.0.2.1", "198.51.100.9")) == "192.0.2.1"
    assert client_address(scope("192.0.2.1", "198.51.100.9")) == "192.0.2.1"
    assert client_address(request(PROXY, "198.51.100.9")) == PROXY


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        (PROXY, ["198.51.100.9"], "198.51.100.9"),
        # The client wrote the leftmost entries itself: only the proxy's own entry counts.
        (PROXY, ["1.2.3.4, 5.6.7.8", "198.51.100.9"], "198.51.100.9"),
        (PROXY, ["1.2.3.4, 198.51.100.9"], "198.51.100.9"),
        # A chain of trusted proxies: the first untrusted address from the right.
        (PROXY, ["1.2.3.4, 198.51.100.9, 10.0.0.7, 172.30.80.9"], "198.51.100.9"),
        # Every hop trusted: the leftmost one.
        (PROXY, ["10.0.0.7"], "10.0.0.7"),
        (PROXY, [], PROXY),
        # A peer that is not a trusted proxy: its header means nothing.
        ("192.0.2.1", ["198.51.100.9"], "192.0.2.1"),
        # What a proxy passed on unchecked is not believed: the proxy is the client.
        (PROXY, ["198.51.100.9, garbage"], PROXY),
        (PROXY, ["[2001:db8::1]:443"], "2001:db8::1"),
        (PROXY, ["198.51.100.9:8080"], "198.51.100.9"),
        ("::ffff:172.30.80.1", ["198.51.100.9"], "198.51.100.9"),
        (None, ["198.51.100.9"], "unknown"),
    ],
)
def test_it_believes_x_forwarded_for_only_as_far_as_trusted_proxies_vouch(behind_proxy, peer, forwarded, client):
    assert client_address(request(peer, *forwarded)) == client
    assert client_address(scope(peer, *forwarded)) == client


def sign_in(client: Client, password: str, forwarded: str | None = None) -> int:
    headers = {"X-Forwarded-For": forwarded} if forwarded else None
    return client.post("/login/", {"username": OWNER_USERNAME, "password": password}, headers=headers).status_code


def test_it_throttles_the_peer_however_the_client_rotates_x_forwarded_for(owner, origin):
    attacker = Client(headers={"Origin": origin}, REMOTE_ADDR="192.0.2.66")

    statuses = [sign_in(attacker, "wrong-guess", forwarded=f"198.51.100.{n}") for n in range(6)]

    assert statuses == [400] * 5 + [429]
    assert sign_in(attacker, OWNER_PASSWORD, forwarded="198.51.100.200") == 429
    assert set(SignInFailure.objects.values_list("client", flat=True)) == {"192.0.2.66"}


def test_it_throttles_the_client_a_trusted_proxy_names(owner, origin, behind_proxy):
    proxy = Client(headers={"Origin": origin}, REMOTE_ADDR=PROXY)

    rotating = [sign_in(proxy, "wrong-guess", forwarded=f"10.9.9.{n}, 198.51.100.9") for n in range(6)]

    assert rotating == [400] * 5 + [429]
    assert sign_in(proxy, OWNER_PASSWORD, forwarded="198.51.100.9") == 429
    assert sign_in(proxy, OWNER_PASSWORD, forwarded="198.51.100.10") == 302


def test_it_counts_an_ipv6_client_by_its_64_bit_prefix(owner, origin):
    statuses = [
        sign_in(Client(headers={"Origin": origin}, REMOTE_ADDR=f"2001:db8:1:2::{n:x}"), "wrong-guess") for n in range(6)
    ]

    assert statuses == [400] * 5 + [429]
    assert set(SignInFailure.objects.values_list("client", flat=True)) == {"2001:db8:1:2::/64"}
    other_network = Client(headers={"Origin": origin}, REMOTE_ADDR="2001:db8:1:3::1")
    assert sign_in(other_network, OWNER_PASSWORD) == 302
