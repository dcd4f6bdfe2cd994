"""The allowlist of providers and models, and the adapter for each provider.

The browser may pick from this catalog but never name an endpoint: base URLs come from
the operator's configuration only.
"""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass

from django.conf import settings

from conversations.providers.base import Adapter

KEYED_PROVIDERS = ("anthropic", "openai")
PROVIDER_LABELS = {"anthropic": "Anthropic", "openai": "OpenAI", "local": "the local model server"}

ANTHROPIC_MODELS = ("claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5")
OPENAI_MODELS = ("gpt-6.2-sol", "gpt-6.1-terra", "gpt-5.4-mini")


@dataclass(frozen=True)
class Configuration:
    provider: str
    model: str


def catalog() -> dict[str, list[str]]:
    """Return every selectable model by provider; `local` lists the operator's models."""
    return {
        "anthropic": list(ANTHROPIC_MODELS),
        "openai": list(OPENAI_MODELS),
        "local": list(settings.CONFIG.local_models),
    }


def in_catalog(provider: str, model: str) -> bool:
    return model in catalog().get(provider, [])


def default_configuration() -> Configuration:
    """The local model when the operator configured one, else the first Anthropic model."""
    local = settings.CONFIG.local_models
    if local:
        return Configuration("local", local[0])
    return Configuration("anthropic", ANTHROPIC_MODELS[0])


# Each provider's adapter, with its SDK: imported on first use, never at the top. Only
# workers talk to providers, and a process holds only the SDKs it has used (docs/architecture.md).
PROVIDER_MODULES = {
    "anthropic": "conversations.providers.anthropic_messages",
    "openai": "conversations.providers.openai_chat",
    "local": "conversations.providers.openai_chat",
}


_loaded: set[str] = set()  # modules whose import has finished (sys.modules has them sooner)


def provider_sdk_load(provider: str) -> bool:
    """Import a provider's adapter and SDK now (blocking); False if it was loaded already.

    Two threads importing at once is safe: Python's import lock makes the second wait.
    """
    module = PROVIDER_MODULES[provider]
    if module in _loaded:
        return False
    importlib.import_module(module)
    _loaded.add(module)
    return True


def providers_all_loaded() -> bool:
    """Whether every provider's SDK is loaded in this process."""
    return _loaded >= set(PROVIDER_MODULES.values())


async def adapter_loaded(provider: str) -> Adapter:
    """The provider's adapter; its SDK's first import runs on a thread, never on the loop.

    A worker's event loop streams every turn: an import there would stop every other
    answer for as long as it takes.
    """
    if provider in PROVIDER_MODULES and PROVIDER_MODULES[provider] not in _loaded:
        await asyncio.to_thread(provider_sdk_load, provider)
    return adapter_for(provider)


def adapter_for(provider: str) -> Adapter:
    config = settings.CONFIG
    if provider == "anthropic":
        from conversations.providers.anthropic_messages import AnthropicAdapter

        return AnthropicAdapter(config.anthropic_base_url)
    from conversations.providers.openai_chat import ChatCompletionsAdapter

    if provider == "openai":
        return ChatCompletionsAdapter(
            base_url=config.openai_base_url, label="OpenAI", needs_key=True, max_tokens_field="max_completion_tokens"
        )
    if provider == "local" and config.local_base_url:
        return ChatCompletionsAdapter(
            base_url=config.local_base_url,
            label="The local model server",
            needs_key=False,
            max_tokens_field="max_tokens",
        )
    raise LookupError(provider)
