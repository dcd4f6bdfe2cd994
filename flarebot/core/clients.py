"""Who is at the other end of a request or socket: the client's address.

Anything that keys on the client (the sign-in throttle) asks `client_address`. Daphne
runs without `--proxy-headers`, so the peer of the connection reaches Django unchanged,
and `X-Forwarded-For` is read here, only as far as `FLAREBOT_TRUSTED_PROXIES` vouches
for it: walking the header from the right (the entry the nearest proxy appended), the
client is the first address that is not a trusted proxy. With no trusted proxies the
header is ignored, since anyone can write it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

UNKNOWN = "unknown"


def _address(raw: str) -> Address | None:
    """Parse an address as a proxy writes it: bare, `[v6]:port`, or `v4:port`."""
    text = raw.strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address: Address, proxies: Iterable[Network]) -> bool:
    return any(address in network for network in proxies)


def client_address_from(peer: str | None, forwarded_for: Iterable[str]) -> str:
    """Return the client's address given the connection's peer and its X-Forwarded-For headers."""
    proxies: tuple[Network, ...] = settings.FLAREBOT_TRUSTED_PROXIES
    client = _address(peer or "")
    if client is None:
        return UNKNOWN
    if not proxies or not _trusted(client, proxies):
        return str(client)
    entries = [entry for header in forwarded_for for entry in header.split(",")]
    for entry in reversed(entries):
        hop = _address(entry)
        if hop is None:
            # A trusted proxy passed on what it was given without checking it: stop at
            # that proxy rather than believe an address nobody vouches for.
            break
        client = hop
        if not _trusted(hop, proxies):
            break
    return str(client)


def client_address(request_or_scope: HttpRequest | Mapping[str, Any]) -> str:
    """Return the client's address of an HTTP request or an ASGI scope (see the module docstring)."""
    if isinstance(request_or_scope, HttpRequest):
        meta = request_or_scope.META
        forwarded = meta.get("HTTP_X_FORWARDED_FOR")
        return client_address_from(meta.get("REMOTE_ADDR"), [forwarded] if forwarded else [])
    scope = request_or_scope
    peer = scope.get("client")
    headers = [
        value.decode("latin-1") for name, value in scope.get("headers", []) if name.lower() == b"x-forwarded-for"
    ]
    return client_address_from(peer[0] if peer else None, headers)
