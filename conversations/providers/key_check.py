"""Checking a provider key when the owner saves it: one cheap authenticated call.

Listing models costs nothing and needs a valid key. The provider's answer decides: a
refused key (401, 403) is not saved; a provider that cannot be reached (or answers
otherwise) leaves the key saved but marked not verified. Nothing of the answer is kept
or logged: neither the key nor the provider's body.
"""

from __future__ import annotations

import enum

import anthropic
import openai
from django.conf import settings

TIMEOUT = 10.0


class KeyCheck(enum.StrEnum):
    VERIFIED = "verified"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"


def provider_key_check(*, provider: str, key: str) -> KeyCheck:
    """Ask the provider whether it takes this key, within 10 s."""
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
        return KeyCheck.REFUSED
    except (openai.AuthenticationError, openai.PermissionDeniedError):
        return KeyCheck.REFUSED
    except (anthropic.APIError, openai.APIError):
        return KeyCheck.UNREACHABLE
    return KeyCheck.VERIFIED
