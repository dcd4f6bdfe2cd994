"""Heartbeats of the long-running processes, for the System section and `make run`.

A worker records one as soon as it is ready, before it says so (its probes not run yet:
the System section says "checking"), again once its optional-part probes ran, then every
HEARTBEAT_SECONDS from a thread of its own, with the probes rerun every PROBE_SECONDS; a
worker that stops removes its row, and its thread records nothing after that (a record in
flight while it stops would bring back a stopped worker and what it found). The
reconciliation job that beat sends records the scheduler's. A process that missed two
heartbeats (STALE_AFTER) counts as gone.
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


class WorkerHeartbeat:
    """One worker's heartbeat: recorded from its start until `stop`, and never after it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._stopped = threading.Event()
        self._lock = threading.Lock()  # a record and the removal never interleave

    def start(self) -> threading.Thread:
        """Record this worker alive now, then keep recording from a thread (a daemon)."""
        self._record(None, None)  # alive at once; what it finds follows
        thread = threading.Thread(target=self._beat, name="heartbeat", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Say that this worker stopped: its row goes, and no record in flight brings it back."""
        with self._lock:
            self._stopped.set()
            heartbeat_forget(name=self.name)

    def _record(self, probes: dict[str, ProbeResult] | None, probed_at: str | None) -> None:
        detail = {"host": socket.gethostname(), "pid": os.getpid(), "probes": probes, "probed_at": probed_at}
        with self._lock:
            if self._stopped.is_set():
                return
            try:
                heartbeat_record(name=self.name, kind="worker", detail=detail)
            except DatabaseError:
                logger.warning("could not record this worker's heartbeat", exc_info=True)
            finally:
                close_old_connections()

    def _beat(self) -> None:
        probes: dict[str, ProbeResult] = {}
        probed_at, probed_iso = float("-inf"), None
        while not self._stopped.is_set():
            if time.monotonic() - probed_at >= PROBE_SECONDS:
                probes, probed_at, probed_iso = probes_run(), time.monotonic(), timezone.now().isoformat()
            self._record(probes, probed_iso)
            self._stopped.wait(HEARTBEAT_SECONDS)
