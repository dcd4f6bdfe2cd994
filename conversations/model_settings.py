"""The model configuration and provider keys every conversation shares.

Keys are sealed with AES-256-GCM before they reach the database and are unsealed only for
the provider client of one turn. Responses say `configured` or `missing`, never more.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal, TypedDict

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations import sql
from conversations.instructions import DEFAULT_INSTRUCTIONS, system_prompt
from conversations.models import ModelConfiguration, ProviderKey
from conversations.providers.catalog import (
    KEYED_PROVIDERS,
    PROVIDER_LABELS,
    Configuration,
    default_configuration,
    in_catalog,
)
from conversations.providers.key_check import KeyCheck, provider_key_check
from flarebot.core.crypto import DecryptionFailed, Secret, seal, unseal
from flarebot.core.errors import InvalidInput
from flarebot.core.installation import installation_get_verified, installation_intact
from flarebot.core.models import Installation
from flarebot.core.rows import from_db
from tools.registry import KeyMissing

KEY_MIN, KEY_MAX = 20, 512

CredentialState = Literal["configured", "missing"]


# "unreadable": a key is stored but no longer opens (the server secret or the installation
# changed); every place that shows or needs it says so and asks the owner to enter it again.
Verification = Literal["verified", "not_verified", "unreadable"]


class ConfigurationView(TypedDict):
    provider: str
    model: str
    # An addition: False when the stored choice left the catalog (an operator changed
    # FLAREBOT_LOCAL_MODELS, an upgrade dropped a model): turns fail until the owner chooses.
    available: bool


class ModelSettingsView(TypedDict):
    configuration: ConfigurationView
    credentials: dict[str, CredentialState]
    # An addition to the contract: whether the provider took each stored key when it was saved.
    verification: dict[str, Verification | None]
    # An addition: why a stored key could not be checked (null when it was, or none is stored).
    unchecked_reasons: dict[str, str | None]


def _configuration() -> Configuration:
    row = ModelConfiguration.objects.first()
    return _configuration_of(row.provider, row.model) if row is not None else default_configuration()


def _configuration_of(provider: str | None, model: str | None) -> Configuration:
    """The stored choice, even one no longer in the catalog (never silently another); the default if none."""
    if provider is not None and model is not None:
        return Configuration(provider, model)
    return default_configuration()


def model_unavailable_message(model: str) -> str:
    return f"The model {model} is no longer offered; choose another in Settings."


def model_settings_get() -> ModelSettingsView:
    """Return the configuration and which providers have a key."""
    rows = {
        row[0]: row[1:]
        for row in ProviderKey.objects.values_list("provider", "verified_at", "unchecked_reason", "sealed")
    }
    installation = installation_get_verified()
    verification = {
        p: _verification_of(rows[p][0], bytes(rows[p][2]), installation) if p in rows else None for p in KEYED_PROVIDERS
    }
    config = _configuration()
    return {
        "configuration": {
            "provider": config.provider,
            "model": config.model,
            "available": in_catalog(config.provider, config.model),
        },
        "credentials": {p: ("configured" if p in rows else "missing") for p in KEYED_PROVIDERS},
        "verification": verification,
        "unchecked_reasons": {
            p: (rows[p][1] or "The provider could not be asked.") if verification[p] == "not_verified" else None
            for p in KEYED_PROVIDERS
        },
    }


def _verification_of(verified_at: object, sealed: bytes, installation: Installation | None) -> Verification:
    if installation is None or _unseal(sealed, installation.installation_id) is None:
        return "unreadable"
    return "verified" if verified_at is not None else "not_verified"


def _unseal(sealed: bytes, installation_id: uuid.UUID) -> Secret | None:
    try:
        return unseal(sealed, server_secret=settings.SECRET_KEY, installation_id=installation_id)
    except DecryptionFailed:
        return None


def key_unreadable_message(provider: str) -> str:
    """The one sentence for a stored key that no longer opens, wherever it is needed."""
    label = PROVIDER_LABELS[provider]
    return (
        f"The stored {label} key can no longer be read (the server secret or the installation changed); "
        "enter it again in Settings."
    )


def key_missing_message(provider: str, purpose: str) -> str:
    return f"Add an {PROVIDER_LABELS[provider]} API key in Settings {purpose}."


def model_configuration_set(*, provider: str, model: str) -> ModelSettingsView:
    """Select a provider and model from the catalog."""
    if not in_catalog(provider, model):
        raise InvalidInput("Choose a provider and model from the catalog.", code="invalid_model")
    with transaction.atomic():
        ModelConfiguration.objects.update_or_create(singleton=True, defaults={"provider": provider, "model": model})
    return model_settings_get()


def _require_keyed_provider(provider: str) -> None:
    if provider not in KEYED_PROVIDERS:
        raise InvalidInput("Keys can be set for anthropic and openai only.", code="invalid_provider")


def provider_key_set(*, provider: str, key: str) -> ModelSettingsView:
    """Store (or replace) a provider's key, sealed, once the provider has not refused it.

    A key the provider refuses is not stored (the one stored before stays); one that could
    not be checked (the provider unreachable) is stored, marked not verified.
    """
    _require_keyed_provider(provider)
    if not KEY_MIN <= len(key) <= KEY_MAX or any(not 33 <= ord(ch) <= 126 for ch in key):
        raise InvalidInput(
            f"A key is {KEY_MIN}-{KEY_MAX} printable ASCII characters without spaces.", code="invalid_key"
        )
    checked = provider_key_check(provider=provider, key=key)
    label = PROVIDER_LABELS[provider]
    if checked.outcome == KeyCheck.REFUSED:
        raise InvalidInput(f"{label} refused this key; it was not saved. Check it and try again.", code="key_refused")
    sealed = seal(key, server_secret=settings.SECRET_KEY, installation_id=_installation_id())
    verified_at = timezone.now() if checked.outcome == KeyCheck.VERIFIED else None
    defaults = {"sealed": sealed, "verified_at": verified_at, "unchecked_reason": checked.reason[:300]}
    with transaction.atomic():
        ProviderKey.objects.update_or_create(provider=provider, defaults=defaults)
    return model_settings_get()


def provider_key_delete(*, provider: str) -> ModelSettingsView:
    """Remove a provider's key."""
    _require_keyed_provider(provider)
    ProviderKey.objects.filter(provider=provider).delete()
    return model_settings_get()


def provider_key_read(*, provider: str) -> Secret | KeyMissing:
    """Return a provider's stored key for a tool that needs it, or what the owner must do.

    The one way a key reaches a tool (through `ToolContext.provider_key`): tools sit below
    this app and never read settings themselves.
    """
    row = ProviderKey.objects.filter(provider=provider).values_list("sealed", flat=True).first()
    if row is None:
        return KeyMissing("missing", key_missing_message(provider, "to use this tool"))
    installation = installation_get_verified()
    key = _unseal(bytes(row), installation.installation_id) if installation is not None else None
    return key if key is not None else KeyMissing("unreadable", key_unreadable_message(provider))


def _installation_id() -> uuid.UUID:
    installation = installation_get_verified()
    if installation is None:
        raise InvalidInput("Flarebot has no owner installation.", code="installation_unavailable")
    return installation.installation_id


@dataclass(frozen=True)
class TurnModel:
    """One coherent snapshot of what a turn runs on: provider, model, key (or why not), instructions."""

    provider: str
    model: str
    key: Secret | None
    problem: tuple[str, str] | None = None  # (code, safe message) when the turn cannot run
    # The system prompt: the owner's instructions (or the defaults), then the product's rules.
    instructions: str = system_prompt(DEFAULT_INSTRUCTIONS)


def turn_model_snapshot() -> TurnModel:
    """Read configuration, key and instructions together, for one turn attempt.

    One plain statement: every turn's start reads it, and four ORM queries cost more CPU
    and round trips than the rest of the start.
    """
    read = _turn_settings_read()
    config = _configuration_of(read.provider, read.model)
    instructions = system_prompt(read.instructions if read.instructions is not None else DEFAULT_INSTRUCTIONS)
    if not in_catalog(config.provider, config.model):
        # Never run the turn on another model, maybe another provider on the owner's bill.
        problem = ("model_unavailable", model_unavailable_message(config.model))
        return TurnModel(config.provider, config.model, None, problem, instructions)
    if config.provider not in KEYED_PROVIDERS:
        return TurnModel(config.provider, config.model, None, instructions=instructions)
    row = read.sealed.get(config.provider)
    if row is None:
        missing = ("provider_key_missing", key_missing_message(config.provider, f"to use {config.model}"))
        return TurnModel(config.provider, config.model, None, missing, instructions)
    key = _unseal(row, read.installation_id) if read.installation_id is not None else None
    if key is None:
        unreadable = ("provider_key_unreadable", key_unreadable_message(config.provider))
        return TurnModel(config.provider, config.model, None, unreadable, instructions)
    return TurnModel(config.provider, config.model, key, instructions=instructions)


@dataclass(frozen=True)
class _SettingsRead:
    provider: str | None
    model: str | None
    sealed: dict[str, bytes]
    instructions: str | None  # the owner's override, if any
    installation_id: uuid.UUID | None  # only when the installation is intact


def _turn_settings_read() -> _SettingsRead:
    row = sql.turn_settings_row(providers=KEYED_PROVIDERS)
    provider, model, *rest = row
    keys_sealed, rest = rest[: len(KEYED_PROVIDERS)], rest[len(KEYED_PROVIDERS) :]
    instructions, installations, installation_id, schema_version, username_then, username_now, active = rest
    intact = installations == 1 and installation_intact(
        schema_version=schema_version, username_then=username_then, username_now=username_now, owner_active=bool(active)
    )
    return _SettingsRead(
        provider=provider,
        model=model,
        sealed={p: bytes(v) for p, v in zip(KEYED_PROVIDERS, keys_sealed, strict=True) if v is not None},
        instructions=instructions,
        installation_id=from_db(Installation, "installation_id", installation_id) if intact else None,
    )
