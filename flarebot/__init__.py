"""Flarebot: a self-hosted personal AI agent for one owner."""

from flarebot.celery import app as celery_app

__all__ = ["celery_app"]
