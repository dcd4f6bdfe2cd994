"""Checking a provider key when the owner saves it: one cheap authenticated call.

Listing models costs nothing and needs a valid key. The provider's answer decides: a
refused key (401, 403) is not saved; a provider that cannot be reached (or answers
otherwise) leaves the key saved but marked not verified. Nothing of the answer is kept
or logged: neither the key nor the provider's body.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from django.conf import settings

from conversations.providers.errors import connection_failure, provider_error_from_status, status_of

TIMEOUT = 10.0


class KeyCheck(enum.StrEnum):
    VERIFIED = "verified"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class KeyChecked:
    outcome: KeyCheck
    reason: str = ""  # why it could not be checked: a safe, classified message


def provider_key_check(*, provider: str, key: str) -> KeyChecked:
    """Ask the provider whether it takes this key, within 10 s."""
    # Only the SDK asked about is loaded, on first use: the web process checks a key rarely.
    if provider == "anthropic":
        import anthropic

        def list_models() -> None:
            with anthropic.Anthropic(
                api_key=key,
                # As the engine's client: the Messages API takes an API key in x-api-key only.
                default_headers={"X-Api-Key": key, "Authorization": anthropic.omit},  # type: ignore[dict-item]
                base_url=settings.CONFIG.anthropic_base_url,
                max_retries=0,
                timeout=TIMEOUT,
            ) as claude:
                claude.models.list(limit=1)

        return _checked("Anthropic", anthropic, list_models)
    if provider == "openai":
        import openai

        def list_openai_models() -> None:
            with openai.OpenAI(
                api_key=key, base_url=settings.CONFIG.openai_base_url, max_retries=0, timeout=TIMEOUT
            ) as gpt:
                gpt.models.list()

        return _checked("OpenAI", openai, list_openai_models)
    raise ValueError(provider)


def _checked(label: str, sdk: ModuleType, call: Callable[[], None]) -> KeyChecked:
    """The provider's answer to `call`, classified; both SDKs name their errors alike."""
    try:
        call()
    except (sdk.AuthenticationError, sdk.PermissionDeniedError):
        return KeyChecked(KeyCheck.REFUSED)
    except sdk.APIConnectionError as error:
        return KeyChecked(KeyCheck.UNREACHABLE, connection_failure(label, error, answering=False).message)
    except sdk.APIError as error:
        return KeyChecked(KeyCheck.UNREACHABLE, provider_error_from_status(label, status_of(error)).message)
    return KeyChecked(KeyCheck.VERIFIED)
