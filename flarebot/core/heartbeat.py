"""Heartbeats of the long-running processes, for the System section and `make run`.

A worker records one as soon as it is ready (its probes not run yet: the System section
says "checking"), again once its optional-part probes ran, then every HEARTBEAT_SECONDS
from a thread of its own, with the probes rerun every PROBE_SECONDS; a worker that stops
removes its row (`heartbeat_forget`). The reconciliation job that beat sends records the
scheduler's. A process that missed two heartbeats (STALE_AFTER) counts as gone.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, close_old_connections
from django.utils import timezone

from flarebot.core.models import Heartbeat
from flarebot.core.probes import ProbeResult, probes_run

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0
PROBE_SECONDS = 60.0
# Two missed heartbeats, and a moment for a busy process: then it is gone.
STALE_AFTER = timedelta(seconds=2 * HEARTBEAT_SECONDS + 5)
FORGET_AFTER = timedelta(days=1)
BEAT = "beat"


def heartbeat_record(*, name: str, kind: str, detail: dict[str, Any] | None = None) -> None:
    """Record that a process is alive now (and what it found)."""
    now = timezone.now()
    fields: dict[str, Any] = {"kind": kind, "seen_at": now}
    if detail is not None:
        fields["detail"] = detail
    Heartbeat.objects.update_or_create(name=name[:200], defaults=fields)
    Heartbeat.objects.filter(seen_at__lt=now - FORGET_AFTER).delete()


def heartbeat_forget(*, name: str) -> None:
    """A process is stopping: it is no longer counted, from now on."""
    Heartbeat.objects.filter(name=name[:200]).delete()


def worker_heartbeat_start(name: str) -> threading.Thread:
    """Start this worker's heartbeat thread (a daemon: it ends with the process)."""
    thread = threading.Thread(target=_beat, args=(name,), name="heartbeat", daemon=True)
    thread.start()
    return thread


def _record(name: str, probes: dict[str, ProbeResult] | None, probed_at: str | None) -> None:
    detail = {"host": socket.gethostname(), "pid": os.getpid(), "probes": probes, "probed_at": probed_at}
    try:
        heartbeat_record(name=name, kind="worker", detail=detail)
    except DatabaseError:
        logger.warning("could not record this worker's heartbeat", exc_info=True)
    finally:
        close_old_connections()


def _beat(name: str) -> None:
    _record(name, None, None)  # alive at once; what it finds follows
    probes: dict[str, ProbeResult] = {}
    probed_at, probed_iso = float("-inf"), None
    while True:
        if time.monotonic() - probed_at >= PROBE_SECONDS:
            probes, probed_at, probed_iso = probes_run(), time.monotonic(), timezone.now().isoformat()
        _record(name, probes, probed_iso)
        time.sleep(HEARTBEAT_SECONDS)
