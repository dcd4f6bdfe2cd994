"""Fixtures of the memory tests: the engine's provider fixture, shared (`anthropic` and `cancels` are everyone's)."""

from __future__ import annotations

from tests.conversations.conftest import provider

__all__ = ["provider"]
