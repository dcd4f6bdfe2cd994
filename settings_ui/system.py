"""What this installation is running on, and what is missing with its fix (the System section).

Read-only and owner-only; nothing secret is in it (URLs without passwords, no keys). The
processes report through their heartbeats, the optional parts through the probes the
workers ran on their machines (`flarebot.core.probes`).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Literal, TypedDict

from django.conf import settings
from django.db import connection
from django.utils import timezone

from conversations.model_settings import key_unreadable_message, model_settings_get
from flarebot.core.broker import EMBEDDED_MARK, redis_is_reachable, url_for_display
from flarebot.core.heartbeat import BEAT, STALE_AFTER
from flarebot.core.models import Heartbeat
from flarebot.core.probes import probe_labels

State = Literal["ok", "missing", "error", "unknown"]

WORKER_FIX = "Start a worker: make run (or: celery -A flarebot worker -Q turns,tools,default)."
BEAT_FIX = "Start the scheduler: make run (or: celery -A flarebot beat); run exactly one."


class Component(TypedDict):
    name: str
    label: str
    state: State
    detail: str
    fix: str | None


def _component(name: str, label: str, state: State, detail: str, fix: str | None = None) -> Component:
    return Component(name=name, label=label, state=state, detail=detail, fix=fix if state != "ok" else None)


def system_status() -> list[Component]:
    """Every component with its state, in the order the page shows them."""
    workers = list(Heartbeat.objects.filter(kind="worker", seen_at__gt=timezone.now() - STALE_AFTER))
    return [
        _database(),
        _broker(),
        _workers(workers),
        _beat(),
        *_probes(workers),
        *_keys(),
    ]


def _database() -> Component:
    if connection.vendor == "postgresql":
        version = connection.pg_version  # type: ignore[attr-defined]
        where = f"{connection.settings_dict.get('HOST') or 'socket'}/{connection.settings_dict.get('NAME')}"
        return _component("database", "Database", "ok", f"PostgreSQL {version // 10000}.{version % 10000} ({where})")
    name = os.path.basename(str(connection.settings_dict.get("NAME")))
    return _component("database", "Database", "ok", f"SQLite {sqlite3.sqlite_version} ({name}, under the data dir)")


def _broker() -> Component:
    url = settings.REDIS_URL
    if not redis_is_reachable(url):
        return _component("broker", "Broker", "missing", f"Nothing answers at {url_for_display(url)}.", "Start Redis.")
    embedded = os.environ.get(EMBEDDED_MARK)
    if embedded:
        return _component(
            "broker", "Broker", "ok", f"A private {embedded} that make run started ({url_for_display(url)})"
        )
    return _component("broker", "Broker", "ok", f"Redis at {url_for_display(url)}")


def _ago(seconds: float) -> str:
    return f"{int(seconds)} s ago" if seconds < 120 else f"{int(seconds // 60)} min ago"


def _workers(alive: list[Heartbeat]) -> Component:
    if not alive:
        return _component("workers", "Workers", "missing", "No worker has been seen recently.", WORKER_FIX)
    newest = max(beat.seen_at for beat in alive)
    count = f"{len(alive)} process{'es' if len(alive) != 1 else ''}"
    since = (timezone.now() - newest).total_seconds()
    return _component("workers", "Workers", "ok", f"{count}, last heartbeat {_ago(since)}")


def _beat() -> Component:
    beat = Heartbeat.objects.filter(name=BEAT).first()
    if beat is None or beat.seen_at <= timezone.now() - STALE_AFTER:
        seen = "never" if beat is None else _ago((timezone.now() - beat.seen_at).total_seconds())
        return _component("beat", "Scheduler", "missing", f"Its last tick: {seen}.", BEAT_FIX)
    return _component("beat", "Scheduler", "ok", f"Last tick {_ago((timezone.now() - beat.seen_at).total_seconds())}")


def _probes(alive: list[Heartbeat]) -> list[Component]:
    """Each optional part as one live worker found it: the one that looked last.

    Findings of different workers are never mixed (a part one worker has says nothing of
    the machine another runs on); until a live worker has looked, the part is "checking".
    """
    reported = [w for w in alive if isinstance(w.detail.get("probes"), dict)]
    latest = max(reported, key=lambda w: (str(w.detail.get("probed_at") or ""), w.seen_at), default=None)
    components = []
    for name, label in probe_labels().items():
        report = latest.detail["probes"].get(name) if latest is not None else None
        if report is not None:
            components.append(_component(name, label, report["state"], report["detail"], report["fix"]))
        elif alive:
            components.append(_component(name, label, "unknown", "Checking: the workers have not reported yet."))
        else:
            components.append(_component(name, label, "unknown", "No worker is running to look for it.", WORKER_FIX))
    return components


def _keys() -> list[Component]:
    """A key is ok only when its provider took it; one it could not be asked about is unknown."""
    settings_view = model_settings_get()
    uses = {"anthropic": "Anthropic's models", "openai": "OpenAI's models and web search"}
    labels = {"anthropic": "Anthropic key", "openai": "OpenAI key"}
    components = []
    for provider, state in settings_view["credentials"].items():
        use = uses.get(provider, provider)
        if state != "configured":
            state_of: State = "missing"
            detail = f"None stored: {use} are unavailable."
        elif settings_view["verification"].get(provider) == "unreadable":
            state_of, detail = "error", key_unreadable_message(provider)
        elif settings_view["verification"].get(provider) == "verified":
            state_of, detail = "ok", f"Stored, and the provider accepted it (needed for {use})"
        else:
            reason = settings_view["unchecked_reasons"].get(provider) or "the provider could not be asked."
            state_of, detail = "unknown", f"Stored, not checked: {reason}"
        fix = {
            "missing": "Add one in Settings, under Model.",
            "error": "Enter it again in Settings, under Model.",
            # It is there: saving it again asks the provider once more.
            "unknown": "Save it again in Settings, under Model, to have the provider check it.",
        }.get(state_of)
        components.append(_component(f"{provider}_key", labels.get(provider, provider), state_of, detail, fix))
    return components
