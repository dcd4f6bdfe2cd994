"""The supervisor `make run` ends in: start web, the worker(s) and beat; Ctrl-C stops them all.

    python -m flarebot.supervisor      (what `make run` runs, after migrate)
    python manage.py runstack          (the same: it hands over to this module)

It stays a small process for as long as Flarebot runs: it imports neither Django nor any
of Flarebot's apps, only the configuration (`flarebot.core.env`), the broker plan and
the process table (`flarebot.core.stack`). What needs the database (is there an owner
yet? what did this run's workers find missing?) is answered once, at the start, by a
short-lived helper (`manage.py runstack --report`) that loads Django while the processes
start, prints the warnings and the address once every process is ready, and exits.

A process that was ready and then exits is started again after a growing pause
(`flarebot.core.restarts`); one that keeps crashing, or never became ready, stops them all.

The screen stays quiet: one line per process as it becomes ready, the warnings that
matter, and the address to open last. Every process's own output goes to its log under
the data dir; FLAREBOT_LOG_LEVEL=info or debug shows it on the screen too.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flarebot.core.broker import EMBEDDED_MARK, BrokerUnavailable, broker_plan, url_for_display, wait_for_redis
from flarebot.core.env import BASE_DIR, ConfigurationError, FlarebotConfig, load_config
from flarebot.core.restarts import ReadyDeadlines, Restarts
from flarebot.core.stack import ProcessSpec, Stack, process_specs
from flarebot.core.stack import _die_with_parent as die_with_parent

BROKER = "broker"
READY_TIMEOUT = 120.0
REPORT_TIMEOUT = 60.0  # the helper: Django's start, then up to 10 s for the workers' probes
# flarebot.core.setup_link.TOKEN_FILE (a module that needs Django); a test holds them equal.
SETUP_TOKEN_FILE = "setup_token"
# Straight to our own web process, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class StartRefused(Exception):
    """The stack cannot start (port taken, no broker); the message says what to do."""


def main() -> int:
    try:
        config = load_config()
        return Supervisor(config).run()
    except (ConfigurationError, StartRefused) as error:
        print(f"Error: {error}", file=sys.stderr, flush=True)
        return 1


class Supervisor:
    def __init__(self, config: FlarebotConfig) -> None:
        self.config = config
        self.log_dir = config.data_dir / "logs"
        self.stopping = False

    def run(self) -> int:
        config = self.config
        problem = listen_problem(config.bind, config.port)
        if problem is not None:
            raise StartRefused(problem)
        try:
            plan = broker_plan(url=config.redis_url, explicit=config.redis_url_explicit, data_dir=config.data_dir)
        except BrokerUnavailable as error:
            raise StartRefused(str(error)) from None
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
        verbose = config.log_level != "warning"
        stack = Stack(specs=specs, env=env, log_dir=self.log_dir, cwd=BASE_DIR, echo=sys.stdout if verbose else None)
        signal.signal(signal.SIGINT, self._request_stop)
        signal.signal(signal.SIGTERM, self._request_stop)
        offsets = {spec.name: len(stack.log_text(spec.name)) for spec in specs}
        started = time.time()
        report = report_helper_started(env)
        try:
            if plan.argv is not None:
                stack.start(only=BROKER)
                if not wait_for_redis(plan.url, stack.processes[BROKER]):
                    raise StartRefused(f"The private {plan.kind} did not start; see {self.log_dir / 'broker.log'}.")
                say(f"broker  ready: a private {plan.kind} at {url_for_display(plan.url)}")
            for spec in specs:
                if spec.name != BROKER:
                    stack.start(only=spec.name)
            return self._watch(stack, report, started, offsets)
        finally:
            _stop_helper(report)
            stack.stop()
            (config.data_dir / SETUP_TOKEN_FILE).unlink(missing_ok=True)

    def _request_stop(self, signum: int, frame: Any) -> None:
        self.stopping = True

    def _watch(self, stack: Stack, report: subprocess.Popen[bytes], started: float, offsets: dict[str, int]) -> int:
        waiting = {s.name: readiness(stack, s.name, offsets[s.name], self.config) for s in stack.specs}
        waiting.pop(BROKER, None)
        deadlines = ReadyDeadlines(READY_TIMEOUT)
        for name in waiting:
            deadlines.starting(name, time.monotonic())
        reported = False
        ever_ready: set[str] = set()
        restarts = Restarts()
        again_at: dict[str, float] = {}  # crashed processes, and when to start each again
        while not self.stopping:
            dead = stack.exited(ignoring=again_at)
            if dead is not None:
                delay = restarts.crashed(dead, time.monotonic()) if dead in ever_ready else None
                if delay is None:
                    say(self._stopping_because(stack, dead, restarts, was_ready=dead in ever_ready), sys.stderr)
                    break
                again_at[dead] = time.monotonic() + delay
                waiting.pop(dead, None)
                deadlines.ended(dead)
                code = stack.processes[dead].returncode
                say(
                    f"{dead} exited (code {code}); starting it again in {delay:g} s. Its log: {self._log(dead)}",
                    sys.stderr,
                )
            for name, at in list(again_at.items()):
                if time.monotonic() >= at:
                    del again_at[name]
                    since = len(stack.log_text(name))
                    stack.restart(name)  # reaps what its group left, then starts it
                    waiting[name] = readiness(stack, name, since, self.config)
                    deadlines.starting(name, time.monotonic())
            if report.poll() not in (None, 0):
                say("The start report failed (its error is above); stopping everything.", sys.stderr)
                break
            for name, ready in list(waiting.items()):
                if ready():
                    del waiting[name]
                    deadlines.ended(name)
                    ever_ready.add(name)
                    say(f"{name:<7} ready")
            if not waiting and not reported:
                reported = True
                _report_go(report, started)
            late = deadlines.late(time.monotonic())
            if late:
                say(f"Still not ready after {READY_TIMEOUT:g} s: {', '.join(late)}. Logs: {self.log_dir}")
            time.sleep(0.1)
        if self.stopping:
            return 0
        say("A Flarebot process stopped unexpectedly.", sys.stderr)
        return 1

    def _stopping_because(self, stack: Stack, dead: str, restarts: Restarts, *, was_ready: bool) -> str:
        code = stack.processes[dead].returncode
        if not was_ready:  # its start failed, and would again
            return f"{dead} exited (code {code}); stopping the others. Its log: {self._log(dead)}"
        minutes = restarts.window / 60
        return (
            f"{dead} exited {restarts.count(dead)} times in {minutes:g} minutes (code {code} last); stopping the "
            f"others. Its log: {self._log(dead)}"
        )

    def _log(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"


def say(line: str, stream: Any = None) -> None:
    print(line, file=stream or sys.stdout, flush=True)


def report_helper_started(env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start `manage.py runstack --report`: it loads Django now and reports when told to."""
    return subprocess.Popen(
        [sys.executable, str(BASE_DIR / "manage.py"), "runstack", "--report"],
        cwd=BASE_DIR,
        env=env,
        stdin=subprocess.PIPE,
        start_new_session=True,  # Ctrl-C reaches the supervisor, which stops it
        preexec_fn=die_with_parent,
    )


def _report_go(report: subprocess.Popen[bytes], started: float) -> None:
    """Every process is ready: the helper prints the warnings and the address, then exits."""
    assert report.stdin is not None
    try:
        report.stdin.write(f"{started}\n".encode("ascii"))
        report.stdin.close()
    except BrokenPipeError:
        pass  # it died; the watch loop says so


def _stop_helper(report: subprocess.Popen[bytes]) -> None:
    if report.poll() is None:
        report.terminate()
        try:
            report.wait(timeout=10)
        except subprocess.TimeoutExpired:
            report.kill()
            report.wait()


def readiness(stack: Stack, name: str, since: int, config: FlarebotConfig) -> Callable[[], bool]:
    """How to tell that a process is ready: web answers /status/; workers and beat say so."""
    if name == "web":
        return lambda: web_answers(config.bind, config.port)
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


def web_answers(bind: str, port: int) -> bool:
    host = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind
    host = f"[{host}]" if ":" in host else host
    try:
        with _DIRECT.open(f"http://{host}:{port}/status/", timeout=1) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


if __name__ == "__main__":
    sys.exit(main())
