"""The web search's HTTP transport: a response body stops with ResponseTooLarge past a limit.

Its own module so that httpx2 loads with the first search, not with the tool's declaration.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2


class ResponseTooLarge(Exception):
    """The search answer is larger than RESPONSE_MAX bytes."""


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise ResponseTooLarge
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose response bodies stop with ResponseTooLarge past `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        response.stream = _BoundedStream(response.stream, self._limit)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
