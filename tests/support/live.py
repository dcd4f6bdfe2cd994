"""The live stack: daphne, a Celery worker and beat as real processes on the test resources."""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import httpx
import redis
from django.conf import settings
from django.db import connection

from flarebot.core.env import BASE_DIR
from flarebot.core.stack import Stack, process_specs


@dataclass
class LiveStack:
    stack: Stack
    base_url: str
    origin: str
    log_dir: Path

    def stop(self) -> None:
        self.stack.stop()

    def restart(self, name: str) -> None:
        """Stop and start one process, and wait until the new one (not the old) is ready."""
        since = self.log_size(name)
        self.stack.restart(name)
        self.wait_ready(name, since=since)

    def wait_ready(self, name: str | None = None, *, since: int = 0) -> None:
        """Wait for the named process (or all); only log lines after `since` count."""
        if name in (None, "web"):
            self.stack.wait_for(self._web_answers, timeout=60, what="daphne to answer /status/")
        if name in (None, "worker"):
            self.stack.wait_for(lambda: " ready." in self.log_since("worker", since), timeout=60, what="worker ready")
        if name in (None, "beat"):
            self.stack.wait_for(lambda: "beat: Starting" in self.log_since("beat", since), timeout=60, what="beat")

    def log_size(self, name: str) -> int:
        """Return how much one process has logged so far (an offset for `log_since`)."""
        return len(self.stack.log_text(name))

    def log_since(self, name: str, offset: int) -> str:
        """Return what one process logged after the offset."""
        return self.stack.log_text(name)[offset:]

    def _web_answers(self) -> bool:
        try:
            return httpx.get(f"{self.base_url}/status/", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def database_connections(self, name: str) -> int:
        """How many connections to this run's database one process holds open now."""
        if connection.vendor == "postgresql":  # each process names itself (PGAPPNAME, flarebot.core.stack)
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND application_name = %s",
                    [f"flarebot {name}"],
                )
                return int(cursor.fetchone()[0])
        # SQLite: the open descriptors of the database file, one per connection.
        database = Path(connection.settings_dict["NAME"]).resolve()
        descriptors = Path(f"/proc/{self.stack.processes[name].pid}/fd")
        targets = []
        for descriptor in descriptors.iterdir():
            with contextlib.suppress(OSError):  # closed while we looked
                targets.append(Path(os.readlink(descriptor)))
        return targets.count(database)

    def logs(self) -> str:
        return "\n".join(self.stack.log_text(name) for name in ("web", "worker", "beat"))


def database_url() -> str:
    """This run's test database as a URL, for processes the tests start."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def start_live_stack() -> LiveStack:
    """Start the processes against this run's database, Redis and data dir, and wait for them."""
    port = int(os.environ["FLAREBOT_PORT"])
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flarebot.settings",
        "DATABASE_URL": database_url(),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the browser tests' allowance stays theirs
    log_dir = Path(settings.FLAREBOT_DATA_DIR) / "logs" / "live"
    worker_name = f"test-{os.getpid()}@{socket.gethostname()}"
    specs = process_specs(bind="127.0.0.1", port=port, worker_name=worker_name, worker_threads=32)
    live = LiveStack(
        stack=Stack(specs=specs, env=env, log_dir=log_dir, cwd=BASE_DIR),
        base_url=f"http://127.0.0.1:{port}",
        origin=settings.FLAREBOT_ORIGIN,
        log_dir=log_dir,
    )
    redis.Redis.from_url(settings.REDIS_URL).ping()
    live.stack.start()
    try:
        live.wait_ready()
    except Exception:
        live.stop()
        raise
    return live
