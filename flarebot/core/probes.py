"""Optional parts of a machine, found rather than assumed: probes that say what is there.

An app registers a probe for each optional part its tools need (Chromium, a Docker
engine, the sandbox image) from its `AppConfig.ready()`. A worker runs them in the
background and reports the results with its heartbeat; the System section and the first
screen of `make run` show them, with the fix for whatever is missing. A missing part
makes only its tools unavailable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Literal, TypedDict

logger = logging.getLogger(__name__)

PROBE_TIMEOUT = 5.0

ProbeState = Literal["ok", "missing", "error"]


class ProbeResult(TypedDict):
    state: ProbeState
    detail: str  # what was found (a path, a version), never a secret
    fix: str | None  # the command or setting that fixes a missing part


ProbeFunction = Callable[[], ProbeResult]

_probes: dict[str, tuple[str, ProbeFunction]] = {}


def probe_register(name: str, label: str, probe: ProbeFunction) -> None:
    """Have workers look for an optional part from now on (`label` is what the page calls it)."""
    _probes[name] = (label, probe)


def probe_labels() -> dict[str, str]:
    return {name: label for name, (label, _) in _probes.items()}


def probes_run() -> dict[str, ProbeResult]:
    """Run every probe, together, each bounded; a probe that fails or hangs reports an error."""
    if not _probes:
        return {}
    results: dict[str, ProbeResult] = {}
    with ThreadPoolExecutor(max_workers=len(_probes), thread_name_prefix="probe") as pool:
        futures = {name: pool.submit(probe) for name, (_, probe) in _probes.items()}
        for name, future in futures.items():
            try:
                results[name] = future.result(timeout=PROBE_TIMEOUT)
            except FutureTimeout:
                results[name] = ProbeResult(state="error", detail="The check did not answer in time.", fix=None)
            except Exception:
                logger.exception("probe %s failed", name)
                results[name] = ProbeResult(state="error", detail="The check failed; see the worker's log.", fix=None)
    return results
