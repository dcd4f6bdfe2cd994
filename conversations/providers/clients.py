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
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flarebot.core.crypto import Secret
from flarebot.core.loops import PerLoop

if TYPE_CHECKING:
    import anthropic
    import openai

logger = logging.getLogger(__name__)

_MAX_CLIENTS = 16


@dataclass
class _Entry:
    client: Any
    holds: int = 0  # streams using the client now
    evicted: bool = False  # out of the cache: closed once its last stream ends


# Per event loop: an SDK client's connection pool belongs to the loop that opened it.
_clients: PerLoop[OrderedDict[tuple[str, ...], _Entry]] = PerLoop(OrderedDict)
_closing: set[asyncio.Task[None]] = set()  # keeps the closes scheduled below alive until they end

# Our own watchdog bounds inactivity; the SDK's timeout only bounds connecting and a
# pathological total, and SDK retries are off so recovery stays in the engine's budget.
_TIMEOUT = 15 * 60.0
_CONNECT_TIMEOUT = 10.0


def _fingerprint(key: Secret | None) -> str:
    return hashlib.sha256(key.reveal().encode()).hexdigest() if key is not None else ""


@asynccontextmanager
async def _held(kind: str, base_url: str, key: Secret | None, make: Callable[[], Any]) -> AsyncIterator[Any]:
    """The cached client for (kind, base_url, key), held for one stream.

    A client pushed out of the cache while streams still use it is closed when the last
    of them ends; one nobody holds is closed at once. (Left to the collector, its
    connection pool would close nowhere and log "Unclosed client session".)
    """
    entries = _clients.get()
    cache_key = (kind, base_url, _fingerprint(key))
    entry = entries.get(cache_key)
    if entry is None:
        entry = entries[cache_key] = _Entry(make())
        while len(entries) > _MAX_CLIENTS:
            _, oldest = entries.popitem(last=False)
            oldest.evicted = True
            if oldest.holds == 0:
                _close_soon(oldest.client)
    else:
        entries.move_to_end(cache_key)
    entry.holds += 1
    try:
        yield entry.client
    finally:
        entry.holds -= 1
        if entry.evicted and entry.holds == 0:
            _close_soon(entry.client)


def _close_soon(client: Any) -> None:
    """Close a client in a task of its own (a stream's end may be a cancellation, which must not wait)."""
    task = asyncio.get_running_loop().create_task(_close(client))
    _closing.add(task)
    task.add_done_callback(_closing.discard)


async def _close(client: Any) -> None:
    try:
        await client.close()
    except Exception:  # a pool that fails to close is no reason to disturb a turn
        logger.warning("could not close an SDK client's connections", exc_info=True)


async def clients_close() -> None:
    """Close every SDK client of the running loop (its owner is shutting down)."""
    entries = _clients.take() or OrderedDict()
    await asyncio.gather(*(_close(entry.client) for entry in entries.values()))


def anthropic_client(base_url: str, key: Secret) -> AbstractAsyncContextManager[anthropic.AsyncAnthropic]:
    """The process's Anthropic client for this key, held while the caller's `async with` lasts."""
    import anthropic  # each provider's SDK loads with its first use (catalog.PROVIDER_MODULES)

    return _held(
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


def openai_client(base_url: str, key: Secret | None) -> AbstractAsyncContextManager[openai.AsyncOpenAI]:
    """The process's OpenAI SDK client for this server and key, held while the caller's `async with` lasts."""
    import openai  # each provider's SDK loads with its first use (catalog.PROVIDER_MODULES)

    return _held(
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
