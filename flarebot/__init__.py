"""Flarebot: a self-hosted personal AI agent for one owner.

The Celery app is not imported here: the supervisor (`python -m flarebot.supervisor`)
imports this package and must stay small. Every process that loads Django loads the app
with its settings (`flarebot.settings`); `celery -A flarebot` finds `flarebot.celery`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["celery_app"]


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from flarebot.celery import app

        return app
    raise AttributeError(f"module 'flarebot' has no attribute {name!r}")
