"""A ready worker loads the SDKs of the providers configured, and only those (issue 30).

Each SDK costs 1-2 s of import and 30-60 MB, so a worker loads them in the background once
it is ready, and only for a provider a turn could use now: one with a stored key, or the
local model the operator named. A turn that needs one not loaded yet imports it on a
thread, so the event loop that streams every other answer never stops for it.
"""

from __future__ import annotations

import threading
import types

import pytest

from conversations import jobs
from conversations.providers import catalog
from tests.support.engine import provider_use

ANTHROPIC = "conversations.providers.anthropic_messages"
CHAT_COMPLETIONS = "conversations.providers.openai_chat"


@pytest.fixture
def imported(monkeypatch) -> list[str]:
    """The provider modules imported from now on, recorded instead of imported."""
    names: list[str] = []
    monkeypatch.setattr(catalog, "importlib", types.SimpleNamespace(import_module=names.append))
    monkeypatch.setattr(catalog, "_loaded", set())
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


def test_a_provider_loaded_once_is_not_imported_again(owner, settings, fake_providers, imported):
    provider_use("anthropic", settings=settings, fake_providers=fake_providers)

    jobs._providers_load()
    jobs._providers_load()

    assert imported == [ANTHROPIC]


async def test_a_turns_first_import_of_its_sdk_runs_off_the_event_loop(monkeypatch):
    threads: list[threading.Thread] = []
    monkeypatch.setattr(
        catalog, "importlib", types.SimpleNamespace(import_module=lambda _: threads.append(threading.current_thread()))
    )
    monkeypatch.setattr(catalog, "_loaded", set())

    first = await catalog.adapter_loaded("anthropic")
    again = await catalog.adapter_loaded("anthropic")

    assert len(threads) == 1
    assert threads[0] is not threading.current_thread()
    assert type(first).__name__ == type(again).__name__ == "AnthropicAdapter"
