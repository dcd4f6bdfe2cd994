"""Run Flarebot's processes together: daphne (web), a Celery worker and Celery beat.

`manage.py runstack` (what `make run` ends in) and the test suite's live-stack fixture
both use `Stack`, so tests exercise the processes exactly as they run. Each child gets
its own process group; stopping sends SIGTERM to every group, then SIGKILL after a grace
period, so nothing is left running.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

WORKER_QUEUES = "turns,tools,default"
PR_SET_PDEATHSIG = 1


_prctl: Callable[..., int] | None
try:
    # Resolved here, in the parent: the child between fork and exec only makes the call.
    _prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None  # not Linux: Ctrl-C and SIGTERM still stop every child


def _die_with_parent() -> None:
    """Have Linux send SIGTERM to the child if the supervisor dies (even by SIGKILL).

    The signal follows the thread that forked the child, so start stacks from a thread
    that lives as long as they do (the main thread, in runstack and the tests).
    """
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class ProcessSpec:
    name: str
    argv: list[str]


def process_specs(
    *, bind: str, port: int, worker_name: str, worker_threads: int, worker_processes: int = 1
) -> list[ProcessSpec]:
    """Return the command lines of web, the worker(s) and beat.

    Extra worker processes (`worker-2`, ...) share the queues; each runs its own event
    loop, so streaming work spreads over the machine's cores.
    """
    python = sys.executable
    workers = [
        ProcessSpec(
            "worker" if n == 1 else f"worker-{n}",
            [
                python, "-m", "celery", "-A", "flarebot", "worker",
                "-Q", WORKER_QUEUES, "-P", "threads", "-c", str(worker_threads),
                "-n", worker_name if n == 1 else f"{n}-{worker_name}",
                "--without-gossip", "--without-mingle", "-l", "INFO",
            ],
        )
        for n in range(1, worker_processes + 1)
    ]  # fmt: skip
    return [
        ProcessSpec("web", [python, "-m", "flarebot.web", "-b", bind, "-p", str(port), "flarebot.asgi:application"]),
        *workers,
        ProcessSpec("beat", [python, "-m", "celery", "-A", "flarebot.celery_beat", "beat", "-l", "INFO", "--pidfile="]),
    ]


@dataclass
class Stack:
    """A set of supervised child processes sharing one environment and log folder."""

    specs: list[ProcessSpec]
    env: Mapping[str, str]
    log_dir: Path
    cwd: Path
    echo: IO[str] | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _pumps: list[threading.Thread] = field(default_factory=list)

    def start(self, only: str | None = None) -> None:
        """Start every process (or the named one)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.specs:
            if only is not None and spec.name != only:
                continue
            process = subprocess.Popen(
                spec.argv,
                cwd=self.cwd,
                # PostgreSQL lists each connection under the process that holds it.
                env={**self.env, "PGAPPNAME": f"flarebot {spec.name}"},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
            self.processes[spec.name] = process
            pump = threading.Thread(target=self._pump, args=(spec.name, process), daemon=True)
            pump.start()
            self._pumps.append(pump)

    def _pump(self, name: str, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        with open(self.log_dir / f"{name}.log", "ab") as log:
            for line in iter(process.stdout.readline, b""):
                log.write(line)
                log.flush()
                if self.echo is not None:
                    self.echo.write(f"{name:>6} | {line.decode('utf-8', 'replace')}")
                    self.echo.flush()

    def exited(self, ignoring: Collection[str] = ()) -> str | None:
        """Return the name of a process that has exited, if any has (other than those ignored)."""
        return next(
            (name for name, proc in self.processes.items() if name not in ignoring and proc.poll() is not None), None
        )

    def signal(self, name: str, signum: int) -> None:
        """Send a signal to one process's whole group."""
        process = self.processes[name]
        if process.poll() is None:
            os.killpg(process.pid, signum)

    def stop(self, only: str | None = None, grace: float = 10.0) -> None:
        """Stop every process (or the named one): SIGTERM, then SIGKILL after the grace period."""
        names = [only] if only else list(self.processes)
        for name in names:
            with contextlib.suppress(ProcessLookupError):
                self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for name in names:
            process = self.processes[name]
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.signal(name, signal.SIGKILL)
                process.wait()
            # Reap stragglers left in the group (a SIGKILLed parent can orphan children).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)

    def restart(self, name: str) -> None:
        """Stop and start one process."""
        self.stop(only=name)
        self.start(only=name)

    def log_text(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def wait_for(self, condition: Callable[[], bool], *, timeout: float, what: str) -> None:
        """Wait until condition() holds; fail with the logs if a process died or time ran out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            dead = self.exited()
            if dead is not None:
                raise RuntimeError(f"{dead} exited while waiting for {what}:\n{self.log_text(dead)[-4000:]}")
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}")
