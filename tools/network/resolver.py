"""Name resolution for the web tools: off the event loop, every answer checked, then pinned.

`addresses_checked` resolves a target's host with the running loop's `getaddrinfo` (which
runs in the loop's executor, so the loop that streams turns never blocks on DNS) and
refuses the name if any address is refused: a name answering a public address first and
a private one second is refused as a whole. The caller then connects to exactly the
addresses returned (`fetch.PinnedResolver` for aiohttp, the proxy for Chromium), so a second
lookup cannot hand the connection another address.

`lookup` is the one place names are resolved; tests replace it (monkeypatch) to play
resolver answers without real DNS.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

from tools.network.policy import ADDRESS_RULES, Refused, Target, address_rule, port_refusal

RESOLVE_TIMEOUT = 10.0


async def system_lookup(host: str, port: int) -> list[str]:
    """Return the addresses the system resolver gives for a name, in its order."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


lookup: Callable[[str, int], Awaitable[list[str]]] = system_lookup


async def addresses_checked(target: Target) -> list[str]:
    """Return the addresses to connect to for a target; raise Refused if any is refused."""
    if target.literal:
        return [target.host]  # an allowlisted IP literal: exactly that address
    try:
        async with asyncio.timeout(RESOLVE_TIMEOUT):
            answers = await lookup(target.host, target.port)
    except TimeoutError:
        raise Refused("unresolved", "The host name could not be resolved in time.") from None
    except OSError:
        raise Refused("unresolved", "The host name does not resolve.") from None
    addresses = list(dict.fromkeys(answers))
    if not addresses:
        raise Refused("unresolved", "The host name does not resolve.")
    if not target.allowed:
        for address in addresses:
            rule = address_rule(address)
            if rule is None:
                continue
            said = f"The host name resolves to {ADDRESS_RULES[rule]}, which Flarebot may not reach."
            on_port = port_refusal(target.entry.rpartition(":")[0], target.port) if target.entry else None
            if on_port is not None:
                raise Refused("address", f"{on_port} {said}", rule="port", entry=target.entry)
            raise Refused("address", said, rule=rule, entry=target.entry)
    return addresses
