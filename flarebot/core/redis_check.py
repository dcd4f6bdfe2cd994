"""Find Redis before the processes start, or start a private one for local runs."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import urlsplit

import redis

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def redis_is_reachable(url: str) -> bool:
    """Return whether a Redis server answers PING at url."""
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def private_redis_argv(url: str, data_dir: Path) -> list[str] | None:
    """Return how to start a private redis-server for url, or None if that is not possible."""
    parts = urlsplit(url)
    server = shutil.which("redis-server")
    if server is None or parts.hostname not in LOOPBACK:
        return None
    directory = data_dir / "redis"
    directory.mkdir(parents=True, exist_ok=True)
    return [
        server, "--bind", parts.hostname, "--port", str(parts.port or 6379),
        "--dir", str(directory), "--save", "", "--appendonly", "yes",
    ]  # fmt: skip


def wait_for_redis(url: str, process: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    """Wait until the started Redis answers, or it exits, or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if redis_is_reachable(url):
            return True
        time.sleep(0.1)
    return False
