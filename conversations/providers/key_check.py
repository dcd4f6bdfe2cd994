"""Checking a provider key when the owner saves it: one cheap authenticated call.

Listing models costs nothing and needs a valid key. The provider's answer decides: a
refused key (401, 403) is not saved; a provider that cannot be reached (or answers
otherwise) leaves the key saved but marked not verified. Nothing of the answer is kept
or logged: neither the key nor the provider's body.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

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
    import anthropic  # the SDKs load on first use: the web process checks a key rarely
    import openai

    label = "Anthropic" if provider == "anthropic" else "OpenAI"
    try:
        if provider == "anthropic":
            with anthropic.Anthropic(
                api_key=key,
                # As the engine's client: the Messages API takes an API key in x-api-key only.
                default_headers={"X-Api-Key": key, "Authorization": anthropic.omit},  # type: ignore[dict-item]
                base_url=settings.CONFIG.anthropic_base_url,
                max_retries=0,
                timeout=TIMEOUT,
            ) as claude:
                claude.models.list(limit=1)
        elif provider == "openai":
            with openai.OpenAI(
                api_key=key, base_url=settings.CONFIG.openai_base_url, max_retries=0, timeout=TIMEOUT
            ) as gpt:
                gpt.models.list()
        else:
            raise ValueError(provider)
    except (anthropic.AuthenticationError, anthropic.PermissionDeniedError):
        return KeyChecked(KeyCheck.REFUSED)
    except (openai.AuthenticationError, openai.PermissionDeniedError):
        return KeyChecked(KeyCheck.REFUSED)
    except (anthropic.APIConnectionError, openai.APIConnectionError) as error:
        return KeyChecked(KeyCheck.UNREACHABLE, connection_failure(label, error, answering=False).message)
    except (anthropic.APIError, openai.APIError) as error:
        return KeyChecked(KeyCheck.UNREACHABLE, provider_error_from_status(label, status_of(error)).message)
    return KeyChecked(KeyCheck.VERIFIED)
