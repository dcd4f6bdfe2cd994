"""Heartbeats of the long-running processes, for the System section and `make run`.

A worker records one every HEARTBEAT_SECONDS from a thread of its own, with the results
of the optional-part probes (rerun every PROBE_SECONDS); the reconciliation job that beat
sends records the scheduler's. A process not seen for STALE_AFTER counts as gone.
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
STALE_AFTER = timedelta(seconds=45)
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


def worker_heartbeat_start(name: str) -> threading.Thread:
    """Start this worker's heartbeat thread (a daemon: it ends with the process)."""
    thread = threading.Thread(target=_beat, args=(name,), name="heartbeat", daemon=True)
    thread.start()
    return thread


def _beat(name: str) -> None:
    probes: dict[str, ProbeResult] = {}
    probed_at = 0.0
    while True:
        if time.monotonic() - probed_at >= PROBE_SECONDS:
            probes, probed_at = probes_run(), time.monotonic()
        detail = {"host": socket.gethostname(), "pid": os.getpid(), "probes": probes}
        try:
            heartbeat_record(name=name, kind="worker", detail=detail)
        except DatabaseError:
            logger.warning("could not record this worker's heartbeat", exc_info=True)
        finally:
            close_old_connections()
        time.sleep(HEARTBEAT_SECONDS)
