"""Fixtures of the memory tests: the engine's provider and cancel-listener fixtures, shared."""

from __future__ import annotations

from tests.conversations.conftest import anthropic, cancels, provider

__all__ = ["anthropic", "cancels", "provider"]
