"""The allowlist of providers and models, and the adapter for each provider.

The browser may pick from this catalog but never name an endpoint: base URLs come from
the operator's configuration only.
"""

from __future__ import annotations

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
# workers talk to providers, and each SDK costs 1-2 s of import and 30-60 MB.
PROVIDER_MODULES = {
    "anthropic": "conversations.providers.anthropic_messages",
    "openai": "conversations.providers.openai_chat",
    "local": "conversations.providers.openai_chat",
}


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
