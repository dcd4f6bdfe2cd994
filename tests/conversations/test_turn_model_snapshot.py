"""What a turn runs on: the configured provider and model with the key unsealed, or why not."""

from __future__ import annotations

import dataclasses

import pytest

from conversations.model_settings import (
    model_configuration_set,
    provider_key_delete,
    provider_key_set,
    turn_model_snapshot,
)
from conversations.providers.catalog import ANTHROPIC_MODELS, OPENAI_MODELS

ANTHROPIC_KEY = "sk-ant-api03-Zq8vR2mK4xT7bN1cW9eY5uH3"
OPENAI_KEY = "sk-proj-Lm3Np5Qr7St9Uv1Wx3Yz5Ab7Cd9"

pytestmark = pytest.mark.django_db


def test_it_returns_the_configured_model_with_its_key(owner):
    provider_key_set(provider="openai", key=OPENAI_KEY)
    model_configuration_set(provider="openai", model=OPENAI_MODELS[1])

    snapshot = turn_model_snapshot()

    assert (snapshot.provider, snapshot.model) == ("openai", OPENAI_MODELS[1])
    assert snapshot.problem is None
    assert snapshot.key is not None
    assert snapshot.key.reveal() == OPENAI_KEY
    assert OPENAI_KEY not in repr(snapshot)
    assert OPENAI_KEY not in str(snapshot)


def test_it_returns_the_default_model_with_its_key(owner):
    provider_key_set(provider="anthropic", key=ANTHROPIC_KEY)

    snapshot = turn_model_snapshot()

    assert (snapshot.provider, snapshot.model) == ("anthropic", ANTHROPIC_MODELS[0])
    assert snapshot.problem is None
    assert snapshot.key.reveal() == ANTHROPIC_KEY


def test_it_returns_the_latest_key_after_a_replacement(owner):
    provider_key_set(provider="anthropic", key=ANTHROPIC_KEY)
    provider_key_set(provider="anthropic", key="sk-ant-api03-TheReplacementKey000000")

    assert turn_model_snapshot().key.reveal() == "sk-ant-api03-TheReplacementKey000000"


def test_it_reports_a_missing_key_with_settings_guidance(owner):
    snapshot = turn_model_snapshot()

    assert (snapshot.provider, snapshot.model) == ("anthropic", ANTHROPIC_MODELS[0])
    assert snapshot.key is None
    code, message = snapshot.problem
    assert code == "provider_key_missing"
    assert "Anthropic" in message
    assert "Settings" in message


def test_it_does_not_fall_back_to_another_providers_key(owner):
    provider_key_set(provider="anthropic", key=ANTHROPIC_KEY)
    model_configuration_set(provider="openai", model=OPENAI_MODELS[0])

    snapshot = turn_model_snapshot()

    assert (snapshot.provider, snapshot.model) == ("openai", OPENAI_MODELS[0])
    assert snapshot.key is None
    code, message = snapshot.problem
    assert code == "provider_key_missing"
    assert "OpenAI" in message
    assert "Settings" in message


def test_it_reports_a_missing_key_after_the_key_was_deleted(owner):
    provider_key_set(provider="openai", key=OPENAI_KEY)
    model_configuration_set(provider="openai", model=OPENAI_MODELS[0])
    provider_key_delete(provider="openai")

    snapshot = turn_model_snapshot()

    assert snapshot.key is None
    assert snapshot.problem[0] == "provider_key_missing"


def test_it_needs_no_key_for_a_local_model(owner, settings):
    settings.CONFIG = dataclasses.replace(
        settings.CONFIG, local_base_url="http://127.0.0.1:11434/v1", local_models=("llama3",)
    )

    snapshot = turn_model_snapshot()

    assert (snapshot.provider, snapshot.model, snapshot.key, snapshot.problem) == ("local", "llama3", None, None)


def test_it_reports_an_unreadable_key_after_the_server_secret_changed(owner, settings):
    provider_key_set(provider="anthropic", key=ANTHROPIC_KEY)
    settings.SECRET_KEY = settings.SECRET_KEY + "-rotated"

    snapshot = turn_model_snapshot()

    assert (snapshot.provider, snapshot.model) == ("anthropic", ANTHROPIC_MODELS[0])
    assert snapshot.key is None
    code, message = snapshot.problem
    assert code == "provider_key_unreadable"
    assert "again" in message
    assert "Settings" in message
    assert ANTHROPIC_KEY not in message


def test_it_reads_a_key_entered_again_after_the_server_secret_changed(owner, settings):
    provider_key_set(provider="openai", key=OPENAI_KEY)
    model_configuration_set(provider="openai", model=OPENAI_MODELS[0])
    settings.SECRET_KEY = settings.SECRET_KEY + "-rotated"
    assert turn_model_snapshot().problem[0] == "provider_key_unreadable"

    provider_key_set(provider="openai", key=OPENAI_KEY)
    snapshot = turn_model_snapshot()

    assert snapshot.problem is None
    assert snapshot.key.reveal() == OPENAI_KEY
