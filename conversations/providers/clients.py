"""SDK clients, created once per process (and event loop) and reused for every turn.

A client per turn would pay a TLS handshake and a new connection pool before every first
delta. They speak HTTP through aiohttp (the SDKs' `aiohttp` extra), which reads a stream
with less CPU per chunk than the default httpx transport (the README's benchmark section
has the figures). Clients are keyed by a fingerprint of the key, so a replaced key gets
a new client; the key itself stays inside the SDK object.
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flarebot.core.crypto import Secret

if TYPE_CHECKING:
    import anthropic
    import openai

_MAX_CLIENTS = 16
# Per event loop: an SDK client's connection pool belongs to the loop that opened it.
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, OrderedDict[tuple[str, ...], Any]] = (
    weakref.WeakKeyDictionary()
)

# Our own watchdog bounds inactivity; the SDK's timeout only bounds connecting and a
# pathological total, and SDK retries are off so recovery stays in the engine's budget.
_TIMEOUT = 15 * 60.0
_CONNECT_TIMEOUT = 10.0


def _fingerprint(key: Secret | None) -> str:
    return hashlib.sha256(key.reveal().encode()).hexdigest() if key is not None else ""


def _cached(kind: str, base_url: str, key: Secret | None, make: Callable[[], Any]) -> Any:
    loop = asyncio.get_running_loop()
    clients = _clients.get(loop)
    if clients is None:
        clients = _clients[loop] = OrderedDict()
    cache_key = (kind, base_url, _fingerprint(key))
    client = clients.get(cache_key)
    if client is None:
        client = clients[cache_key] = make()
        while len(clients) > _MAX_CLIENTS:
            clients.popitem(last=False)
    else:
        clients.move_to_end(cache_key)
    return client


def anthropic_client(base_url: str, key: Secret) -> anthropic.AsyncAnthropic:
    import anthropic  # each provider's SDK loads with its first use (catalog.PROVIDER_MODULES)

    return _cached(
        "anthropic",
        base_url,
        key,
        lambda: anthropic.AsyncAnthropic(
            api_key=key.reveal(),
            # This SDK sends `api_key` as `Authorization: Bearer`; the Messages API takes
            # an API key in `x-api-key` only (Bearer is for OAuth tokens).
            default_headers={"X-Api-Key": key.reveal(), "Authorization": anthropic.omit},  # type: ignore[dict-item]
            base_url=base_url,
            max_retries=0,
            timeout=anthropic.Timeout(_TIMEOUT, connect=_CONNECT_TIMEOUT),
            http_client=anthropic.DefaultAioHttpClient(),
        ),
    )


def openai_client(base_url: str, key: Secret | None) -> openai.AsyncOpenAI:
    import openai  # each provider's SDK loads with its first use (catalog.PROVIDER_MODULES)

    return _cached(
        "openai",
        base_url,
        key,
        lambda: openai.AsyncOpenAI(
            # A local OpenAI-compatible server needs no key; the SDK insists on one.
            api_key=key.reveal() if key is not None else "no-key",
            base_url=base_url,
            max_retries=0,
            timeout=openai.Timeout(_TIMEOUT, connect=_CONNECT_TIMEOUT),
            http_client=openai.DefaultAioHttpClient(),
        ),
    )
