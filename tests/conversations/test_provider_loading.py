"""A ready worker loads the SDKs of the providers configured, and only those (issue 30).

Each SDK costs 1-2 s of import and 30-60 MB, so a worker loads them in the background once
it is ready, and only for a provider a turn could use now: one with a stored key, or the
local model the operator named.
"""

from __future__ import annotations

import types

import pytest

from conversations import jobs
from tests.support.engine import provider_use

ANTHROPIC = "conversations.providers.anthropic_messages"
CHAT_COMPLETIONS = "conversations.providers.openai_chat"


@pytest.fixture
def imported(monkeypatch) -> list[str]:
    """The modules `_providers_load` imports, recorded instead of imported."""
    names: list[str] = []
    monkeypatch.setattr(jobs, "importlib", types.SimpleNamespace(import_module=names.append))
    monkeypatch.setattr(jobs, "heap_settle", lambda: None)
    return names


@pytest.mark.parametrize(
    ("provider", "modules"), [("anthropic", [ANTHROPIC]), ("openai", [CHAT_COMPLETIONS]), ("local", [CHAT_COMPLETIONS])]
)
def test_a_ready_worker_loads_the_sdk_of_the_configured_provider_only(
    owner, settings, fake_providers, imported, provider, modules
):
    provider_use(provider, settings=settings, fake_providers=fake_providers)

    jobs._providers_load()

    assert imported == modules


def test_with_two_keys_stored_it_loads_both(owner, settings, fake_providers, imported):
    provider_use("anthropic", settings=settings, fake_providers=fake_providers)
    provider_use("openai", settings=settings, fake_providers=fake_providers)

    jobs._providers_load()

    assert imported == [ANTHROPIC, CHAT_COMPLETIONS]


def test_with_no_provider_configured_it_loads_no_sdk(owner, imported):
    jobs._providers_load()

    assert imported == []
