"""One GET through the network policy: pinned connections, checked redirects, a bounded body.

Every hop (the first request and each redirect, at most `MAX_REDIRECTS`) passes
`url_check` and `addresses_checked`, and gets a connector of its own whose resolver knows
only that hop's checked addresses: no connection is reused across hops, and none goes
anywhere the policy did not look. The body is read until `max_bytes`, then the download
stops. Cancelling the awaiting task closes the connection.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from tools.network.policy import Refused, Target, url_check
from tools.network.resolver import addresses_checked

MAX_REDIRECTS = 5
REDIRECTS = frozenset({301, 302, 303, 307, 308})
CHUNK = 16 * 1024
USER_AGENT = "Flarebot/1 (self-hosted personal agent; +read_url)"
CONNECT_TIMEOUT = 10.0
REDIRECTED = "The page redirected somewhere Flarebot may not go: "


class FetchFailed(Exception):
    """A fetch failed for a reason outside the policy; `message` is safe to show."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class Fetched:
    final_url: str
    status: int
    content_type: str  # the media type, lowercased ("" when none was sent)
    charset: str | None
    body: bytes
    truncated: bool  # the download stopped at max_bytes


async def fetch(raw_url: str, *, max_bytes: int, accept: str) -> Fetched:
    """GET a URL through the policy, following at most MAX_REDIRECTS checked redirects."""
    target = url_check(raw_url)
    for hop in range(MAX_REDIRECTS + 1):
        try:
            addresses = await addresses_checked(target)
        except Refused as refused:
            if hop == 0:
                raise
            raise refused.redirected(REDIRECTED) from None
        connector = aiohttp.TCPConnector(
            resolver=PinnedResolver(target.host, addresses), use_dns_cache=False, force_close=True, limit=1
        )
        headers = {"User-Agent": USER_AGENT, "Accept": accept}
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
        async with aiohttp.ClientSession(
            connector=connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(), timeout=timeout
        ) as session:
            try:
                async with session.get(target.url, headers=headers, allow_redirects=False) as response:
                    if response.status in REDIRECTS:
                        if hop == MAX_REDIRECTS:
                            raise FetchFailed("redirects", f"The page redirected more than {MAX_REDIRECTS} times.")
                        target = _redirect_target(target, response.headers.get("Location", ""))
                        continue
                    body, truncated = await _read_bounded(response, max_bytes)
                    return Fetched(
                        final_url=str(target.url),
                        status=response.status,
                        content_type=response.content_type.lower() if "Content-Type" in response.headers else "",
                        charset=response.charset,
                        body=body,
                        truncated=truncated,
                    )
            except aiohttp.ClientSSLError:
                raise FetchFailed("tls", "The site's TLS certificate or handshake was not accepted.") from None
            except (aiohttp.ClientError, OSError):
                raise FetchFailed("unreachable", "The site could not be reached or broke the connection.") from None
    raise AssertionError("unreachable")  # the loop returns or raises


def _redirect_target(current: Target, location: str) -> Target:
    """Check a redirect's Location with the whole policy, as written when it is absolute."""
    if not location:
        raise FetchFailed("redirect", "The page redirected without saying where.")
    try:
        if "://" in location.partition("?")[0].partition("#")[0]:
            raw = location
        elif location.startswith("//"):
            raw = f"{current.url.scheme}:{location}"
        else:
            raw = str(current.url.join(URL(location)))
    except (ValueError, UnicodeError):
        raise FetchFailed("redirect", "The page redirected to a URL that cannot be parsed.") from None
    try:
        return url_check(raw)
    except Refused as refused:
        raise refused.redirected(REDIRECTED) from None


async def _read_bounded(response: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(CHUNK):
        parts.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(parts)[:max_bytes], True
    return b"".join(parts), False


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class PinnedResolver(AbstractResolver):
    """An aiohttp resolver that knows one host and answers only its checked addresses.

    aiohttp connects to the address returned and keeps the URL's host for the Host header
    and the TLS server name, so the request goes exactly where the policy looked.
    """

    def __init__(self, host: str, addresses: list[str]) -> None:
        self._host = host
        self._addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host != self._host:
            raise OSError(f"no pinned address for {host!r}")
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": _family(address),
                "proto": socket.IPPROTO_TCP,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in self._addresses
        ]

    async def close(self) -> None:
        return None
