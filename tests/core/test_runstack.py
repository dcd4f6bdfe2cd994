"""`manage.py runstack` (what `make run` ends in): starts everything, Ctrl-C stops everything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis

from flarebot.core.env import BASE_DIR
from tests.support.resources import free_port

pytestmark = pytest.mark.live


def _children_of(pid: int) -> set[int]:
    """Return every live descendant of pid (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _wait(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def _status_ok(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/status/", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _runstack(tmp_path: Path, redis_url: str, port: int) -> subprocess.Popen[str]:
    data_dir = tmp_path / "data"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flarebot.settings",
        "FLAREBOT_DATA_DIR": str(data_dir),
        "FLAREBOT_PORT": str(port),
        "REDIS_URL": redis_url,
        "FLAREBOT_WORKER_CONCURRENCY": "4",
    }
    for name in ("DATABASE_URL", "FLAREBOT_ORIGIN", "FLAREBOT_MODE"):
        env.pop(name, None)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=BASE_DIR, env=env, check=True)
    return subprocess.Popen(
        [*manage, "runstack"], cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_it_runs_every_process_and_stops_them_all_on_ctrl_c(tmp_path):
    port = free_port()
    process = _runstack(tmp_path, os.environ["REDIS_URL"], port)
    try:
        assert _wait(lambda: _status_ok(port), 60), "daphne never answered"
        children = _children_of(process.pid)
        assert len(children) >= 3  # web, worker, beat (and the worker's own threads' processes)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    assert "No owner yet" in output
    assert "createowner" in output
    assert _wait(lambda: not (_children_of(process.pid) | {c for c in children if Path(f"/proc/{c}").exists()}), 10)
    assert not _status_ok(port)


def test_it_starts_a_private_redis_when_none_answers(tmp_path):
    port, redis_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    process = _runstack(tmp_path, redis_url, port)
    try:
        assert _wait(lambda: _status_ok(port), 60), "daphne never answered"
        assert redis.Redis.from_url(redis_url).ping()
        assert (tmp_path / "data" / "redis").is_dir()
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert "starting a private redis-server" in output
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(redis_url, socket_connect_timeout=1).ping()


def test_it_stops_with_a_clear_message_when_redis_is_unreachable_and_not_local(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flarebot.settings",
        "FLAREBOT_DATA_DIR": str(tmp_path / "data"),
        # A port on loopback that nothing listens on, under a name that is not loopback
        # to runstack, so it may not start a private server: it must refuse to go on.
        "REDIS_URL": f"redis://localhost.invalid:{free_port()}/0",
    }
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "runstack"], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode != 0
    assert "Redis does not answer" in result.stderr + result.stdout
