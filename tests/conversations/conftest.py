"""Fixtures of the in-process engine tests: a provider to talk to, a cancel listener."""

from __future__ import annotations

import pytest

from tests.support.engine import PROVIDERS, Provider, provider_use


@pytest.fixture(params=PROVIDERS)
def provider(request, owner, settings, fake_providers) -> Provider:
    """Each of the three providers in turn, configured (with a key where it needs one)."""
    return provider_use(request.param, settings=settings, fake_providers=fake_providers)
