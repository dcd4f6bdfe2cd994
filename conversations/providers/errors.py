"""Provider failures turned into bounded, safe, actionable messages.

Nothing from an upstream response body or exception text is kept: a body may echo the
key. Only the error class and status code choose the message.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import aiohttp
import httpx2


class ProviderError(Exception):
    """A model call failed; `message` is safe to log, store and show."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        self.code = code
        self.message = message
        self.retryable = retryable
        super().__init__(message)


def provider_error_from_status(provider_label: str, status: int | None, *, keyed: bool = True) -> ProviderError:
    """Return the safe error for an HTTP status from a provider: what happened, and what to do."""
    if status in (401, 403) and not keyed:
        return ProviderError(
            "provider_auth",
            f"{provider_label} refused the request (HTTP {status}). Check the server's access settings.",
        )
    if status == 401:
        return ProviderError(
            "provider_auth", f"{provider_label} rejected the API key (HTTP 401). Check or replace it in Settings."
        )
    if status == 403:
        return ProviderError(
            "provider_forbidden",
            f"{provider_label} refused this key access (HTTP 403): it may lack permission for this model or "
            "this region. Check the key's permissions in your account.",
        )
    if status == 429:
        return ProviderError(
            "provider_rate_limited",
            f"{provider_label} is rate limiting this key (HTTP 429). Try again in a minute, or raise the limit "
            "in your account.",
        )
    if status == 404:
        return ProviderError(
            "provider_model_unavailable",
            f"{provider_label} does not offer the selected model to this key. Choose another in Settings.",
        )
    if status in (400, 413, 422):
        return ProviderError("provider_rejected", f"{provider_label} rejected the request (HTTP {status}).")
    if status is not None and (status >= 500 or status == 529):
        return ProviderError(
            "provider_unavailable",
            f"{provider_label} is overloaded or having problems (HTTP {status}). Try again in a few minutes.",
        )
    return ProviderError("provider_error", f"{provider_label} returned an error.")


def _causes(error: BaseException) -> Iterator[BaseException]:
    """The error and everything it was raised from or during, outermost first (bounded)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


_TIMEOUTS = (TimeoutError, httpx2.TimeoutException, aiohttp.ServerTimeoutError)


def connection_failure(provider_label: str, error: BaseException, *, answering: bool) -> ProviderError:
    """Say what went wrong with the connection: no name, refused, TLS, no answer in time, or lost mid-answer."""
    causes = list(_causes(error))
    if answering:
        return ProviderError(
            "provider_connection",
            f"The connection to {provider_label} broke off in the middle of the answer. Try again; if it keeps "
            "happening, check this server's network.",
            retryable=True,
        )
    if any(isinstance(c, socket.gaierror | aiohttp.ClientConnectorDNSError) for c in causes):
        return ProviderError(
            "provider_dns",
            f"This server could not look up {provider_label}'s address (DNS). Check its network and DNS settings, "
            "or the provider's base URL.",
            retryable=True,
        )
    if any(isinstance(c, ssl.SSLError | aiohttp.ClientSSLError) for c in causes):
        return ProviderError(
            "provider_tls",
            f"The secure connection to {provider_label} failed (TLS): its certificate was not accepted. Check the "
            "server's clock, its CA certificates, or a proxy that intercepts TLS.",
        )
    if any(isinstance(c, ConnectionRefusedError) for c in causes):
        return ProviderError(
            "provider_refused",
            f"{provider_label} refused the connection: nothing listens at its address. Check the provider's base "
            "URL and that the service runs.",
            retryable=True,
        )
    if any(isinstance(c, _TIMEOUTS) for c in causes):
        return ProviderError(
            "provider_timeout",
            f"{provider_label} did not answer in time. Check this server's network, or try again.",
            retryable=True,
        )
    return ProviderError(
        "provider_unreachable",
        f"Flarebot could not connect to {provider_label}. Check this server's network.",
        retryable=True,
    )


def malformed_stream(provider_label: str) -> ProviderError:
    return ProviderError("provider_malformed", f"{provider_label} sent a response Flarebot could not read.")


def status_of(error: Any) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


@contextmanager
def sdk_errors(
    sdk: ModuleType,
    label: str,
    *,
    keyed: bool = True,
    answering: bool = False,
) -> Iterator[None]:
    """Turn an official SDK's exceptions (`anthropic` or `openai`) into safe ProviderErrors.

    `answering`: the answer had begun (its stream is being read), so a connection error is
    a connection lost mid-answer; before, it is classified by its cause.
    """
    try:
        yield
    except sdk.APIStatusError as error:
        raise provider_error_from_status(label, status_of(error), keyed=keyed) from None
    except (sdk.APIConnectionError, httpx2.HTTPError) as error:
        raise connection_failure(label, error, answering=answering) from None
    except sdk.APIError:
        raise provider_error_from_status(label, None, keyed=keyed) from None
    except (ValueError, KeyError, AttributeError, TypeError):
        raise malformed_stream(label) from None
