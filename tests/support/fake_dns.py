"""Resolver answers played to the network policy instead of real DNS.

The policy resolves names only through `tools.network.resolver.lookup`; tests replace it
with a `FakeDns` whose table they fill, so the answers (public then private, metadata,
...) are exactly what a test says, and no real lookup ever leaves the machine. A name not
in the table does not resolve.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field


@dataclass
class FakeDns:
    answers: dict[str, list[str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)
    delay: float = 0.0

    def add(self, name: str, *addresses: str) -> None:
        self.answers[name.lower()] = list(addresses)

    async def lookup(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if self.delay:
            await asyncio.sleep(self.delay)
        found = self.answers.get(host.lower())
        if found is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return list(found)
