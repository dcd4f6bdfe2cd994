"""Fixtures of the in-process engine tests: a provider to talk to, a cancel listener."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from conversations.cancel_bus import CancelListener
from tests.support.engine import PROVIDERS, Provider, engine_cleanup, provider_use


@pytest.fixture(params=PROVIDERS)
def provider(request, owner, settings, fake_providers) -> Provider:
    """Each of the three providers in turn, configured (with a key where it needs one)."""
    return provider_use(request.param, settings=settings, fake_providers=fake_providers)


@pytest.fixture
def anthropic(owner, settings, fake_providers) -> Provider:
    return provider_use("anthropic", settings=settings, fake_providers=fake_providers)


@pytest.fixture
async def cancels() -> AsyncIterator[CancelListener]:
    listener = CancelListener()
    yield listener
    await engine_cleanup(listener)
