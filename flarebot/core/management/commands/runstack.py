"""`python manage.py runstack`: run web, worker and beat in the foreground until Ctrl-C.

The screen stays quiet: one line per process as it becomes ready, the warnings that
matter, and the address to open last. Every process's own output (Celery's banner, its
warnings) goes to its log under the data dir; FLAREBOT_LOG_LEVEL=info or debug shows it
on the screen too.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from flarebot.core.broker import EMBEDDED_MARK, BrokerUnavailable, broker_plan, url_for_display, wait_for_redis
from flarebot.core.env import BASE_DIR
from flarebot.core.hints import CREATE_OWNER_COMMAND
from flarebot.core.installation import installation_get_verified
from flarebot.core.models import Heartbeat, Installation
from flarebot.core.probes import ProbeResult, probe_labels
from flarebot.core.setup_link import SETUP_PATH, setup_token_issue, setup_token_revoke
from flarebot.core.stack import ProcessSpec, Stack, process_specs

BROKER = "broker"
# Straight to our own web process, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
READY_TIMEOUT = 120.0


class Command(BaseCommand):
    help = "Run Flarebot's web, worker and beat processes in the foreground."

    def handle(self, *args: Any, **options: Any) -> None:
        config = settings.CONFIG
        problem = listen_problem(config.bind, config.port)
        if problem is not None:
            raise CommandError(problem)
        try:
            plan = broker_plan(url=config.redis_url, explicit=config.redis_url_explicit, data_dir=config.data_dir)
        except BrokerUnavailable as error:
            raise CommandError(str(error)) from None
        env = {**os.environ, "REDIS_URL": plan.url}
        if plan.embedded:
            env[EMBEDDED_MARK] = plan.kind
        specs = process_specs(
            bind=config.bind,
            port=config.port,
            worker_name=f"worker-{os.getpid()}@{socket.gethostname()}",
            worker_threads=config.worker_concurrency,
            worker_processes=config.worker_processes,
        )
        if plan.argv is not None:
            specs.insert(0, ProcessSpec(BROKER, plan.argv))
        log_dir = config.data_dir / "logs"
        verbose = config.log_level != "warning"
        stack = Stack(specs=specs, env=env, log_dir=log_dir, cwd=BASE_DIR, echo=sys.stdout if verbose else None)
        stopping = False

        def request_stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, request_stop)
        signal.signal(signal.SIGTERM, request_stop)
        offsets = {spec.name: _log_size(stack, spec.name) for spec in specs}
        started = timezone.now()
        setup_token = None if Installation.objects.exists() else setup_token_issue(data_dir=config.data_dir)
        try:
            if plan.argv is not None:
                stack.start(only=BROKER)
                if not wait_for_redis(plan.url, stack.processes[BROKER]):
                    raise CommandError(f"The private {plan.kind} did not start; see {log_dir / 'broker.log'}.")
                self.stdout.write(f"broker  ready: a private {plan.kind} at {url_for_display(plan.url)}")
            for spec in specs:
                if spec.name != BROKER:
                    stack.start(only=spec.name)
            waiting = {spec.name: _readiness(stack, spec.name, offsets[spec.name]) for spec in specs}
            waiting.pop(BROKER, None)
            deadline = time.monotonic() + READY_TIMEOUT
            while not stopping:
                dead = stack.exited()
                if dead is not None:
                    self.stderr.write(f"{dead} exited; stopping the others. Its log: {log_dir / (dead + '.log')}")
                    break
                for name, ready in list(waiting.items()):
                    if ready():
                        del waiting[name]
                        self.stdout.write(f"{name:<7} ready")
                        if not waiting:
                            self._warnings_and_address(config.origin, log_dir, started, setup_token)
                if waiting and time.monotonic() > deadline:
                    names = ", ".join(sorted(waiting))
                    self.stderr.write(f"Still not ready after {READY_TIMEOUT:g} s: {names}. Logs: {log_dir}")
                    deadline = float("inf")
                time.sleep(0.2)
        finally:
            stack.stop()
            setup_token_revoke(data_dir=config.data_dir)
        if not stopping:
            raise CommandError("A Flarebot process stopped unexpectedly.")

    def _warnings_and_address(self, origin: str, log_dir: Any, started: datetime, setup_token: str | None) -> None:
        if setup_token is not None and not Installation.objects.exists():
            # The one place the token is shown: this screen (never a log).
            self.stdout.write(
                "warning: no owner yet. Create one in the browser with this one-time link:\n"
                f"  {origin}{SETUP_PATH}?token={setup_token}\n"
                f"or in another terminal: {CREATE_OWNER_COMMAND}"
            )
        elif installation_get_verified() is None:
            self.stdout.write("warning: the installation no longer matches its owner; Flarebot answers 503.")
        labels = probe_labels()
        for name, found in _probes_of_this_run(started).items():
            if found["state"] != "ok":
                fix = f" {found['fix']}" if found["fix"] else ""
                self.stdout.write(f"warning: {labels.get(name, name)} is missing: {found['detail']}{fix}")
        self.stdout.write(f"Logs: {log_dir}")
        self.stdout.write(f"Open {origin}/ (Ctrl-C stops everything)")


def _probes_of_this_run(started: datetime, wait: float = 10.0) -> dict[str, ProbeResult]:
    """What this run's workers found on the machine (their first heartbeat carries it)."""
    give_up = time.monotonic() + wait
    while time.monotonic() < give_up:
        beats = Heartbeat.objects.filter(kind="worker", seen_at__gte=started).values_list("detail", flat=True)
        found = next((detail["probes"] for detail in beats if detail.get("probes")), None)
        if found is not None or not probe_labels():
            return found or {}
        time.sleep(0.2)
    return {}


def _log_size(stack: Stack, name: str) -> int:
    return len(stack.log_text(name))


def _readiness(stack: Stack, name: str, since: int) -> Callable[[], bool]:
    """How to tell that a process is ready: web answers /status/; workers and beat say so."""
    if name == "web":
        return _web_answers
    marker = "beat: Starting" if name == "beat" else " ready."
    return lambda: marker in stack.log_text(name)[since:]


def listen_problem(bind: str, port: int) -> str | None:
    """Why web could not listen on bind:port (another program holds it, say), or None."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As daphne binds: a port left in TIME_WAIT by an earlier run is free, a listener is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return (
                    f"Port {port} on {bind} is already in use (another Flarebot, or another program). "
                    f"Stop that, or choose another port: FLAREBOT_PORT={_other_port(port)} make run"
                )
            return f"Cannot listen on {bind}:{port} ({error.strerror}); check FLAREBOT_BIND and FLAREBOT_PORT."
    return None


def _other_port(port: int) -> int:
    return port + 1 if port < 65535 else 8001


def _web_answers() -> bool:
    config = settings.CONFIG
    host = "127.0.0.1" if config.bind in ("0.0.0.0", "::") else config.bind
    host = f"[{host}]" if ":" in host else host
    try:
        with _DIRECT.open(f"http://{host}:{config.port}/status/", timeout=1) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False
