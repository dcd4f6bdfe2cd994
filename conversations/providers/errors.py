"""Provider failures turned into bounded, safe, actionable messages.

Nothing from an upstream response body or exception text is kept: a body may echo the
key. Only the error class and status code choose the message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import httpx2


class ProviderError(Exception):
    """A model call failed; `message` is safe to log, store and show."""

    def __init__(self, code: str, message: str, *, retryable: bool = False) -> None:
        self.code = code
        self.message = message
        self.retryable = retryable
        super().__init__(message)


def provider_error_from_status(provider_label: str, status: int | None, *, keyed: bool = True) -> ProviderError:
    """Return the safe error for an HTTP status from a provider."""
    if status in (401, 403) and not keyed:
        return ProviderError(
            "provider_auth", f"{provider_label} refused the request. Check the server's access settings."
        )
    if status in (401, 403):
        return ProviderError(
            "provider_auth",
            f"{provider_label} rejected the API key. Check or replace it in Settings.",
        )
    if status == 429:
        return ProviderError("provider_rate_limited", f"{provider_label} is rate limiting requests. Try again shortly.")
    if status == 404:
        return ProviderError(
            "provider_model_unavailable",
            f"{provider_label} does not offer the selected model to this key. Choose another in Settings.",
        )
    if status in (400, 413, 422):
        return ProviderError("provider_rejected", f"{provider_label} rejected the request.")
    if status is not None and (status >= 500 or status == 529):
        return ProviderError(
            "provider_unavailable", f"{provider_label} is overloaded or unavailable. Try again in a moment."
        )
    return ProviderError("provider_error", f"{provider_label} returned an error.")


def connection_error(provider_label: str) -> ProviderError:
    """Return the retryable error for a dropped or refused connection."""
    return ProviderError(
        "provider_connection",
        f"The connection to {provider_label} was lost before the answer finished.",
        retryable=True,
    )


def malformed_stream(provider_label: str) -> ProviderError:
    return ProviderError("provider_malformed", f"{provider_label} sent a response Flarebot could not read.")


def status_of(error: Any) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


@contextmanager
def sdk_errors(
    sdk: ModuleType, label: str, *, keyed: bool = True, status_of_error: Callable[[Any], int | None] = status_of
) -> Iterator[None]:
    """Turn an official SDK's exceptions (`anthropic` or `openai`) into safe ProviderErrors."""
    try:
        yield
    except sdk.APIStatusError as error:
        raise provider_error_from_status(label, status_of_error(error), keyed=keyed) from None
    except (sdk.APIConnectionError, httpx2.HTTPError):
        raise connection_error(label) from None
    except sdk.APIError:
        raise provider_error_from_status(label, None, keyed=keyed) from None
    except (ValueError, KeyError, AttributeError):
        raise malformed_stream(label) from None
