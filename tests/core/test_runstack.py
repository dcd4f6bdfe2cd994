"""`manage.py runstack` (what `make run` ends in): starts everything, Ctrl-C stops everything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

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
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(process.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        assert _wait(lambda: any(line.startswith("Open http") for line in seen), 90), "".join(seen)
        assert _status_ok(port)
        children = _children_of(process.pid)
        assert len(children) >= 3  # web, worker, beat (and the worker's own threads' processes)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        reader.join(timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
    output = "".join(seen)
    assert process.returncode == 0
    lines = output.splitlines()
    ready = {line.split()[0] for line in lines if line.endswith(" ready")}
    assert {"web", "worker", "beat"} <= ready <= {"web", "beat"} | {"worker", *(f"worker-{n}" for n in range(2, 9))}
    assert "warning: no owner yet" in output
    assert "createowner" in output
    assert f"Open http://127.0.0.1:{port}/ (Ctrl-C stops everything)" in output
    assert "celery@" not in output  # the banner is in the worker's log, not on the screen
    assert _wait(lambda: not (_children_of(process.pid) | {c for c in children if Path(f"/proc/{c}").exists()}), 10)
    assert not _status_ok(port)


def test_it_stops_with_a_clear_message_when_the_redis_url_set_answers_not(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flarebot.settings",
        "FLAREBOT_DATA_DIR": str(tmp_path / "data"),
        # Set by the operator, on loopback, with nothing listening: it is never replaced
        # by a private server, even though one could be started there.
        "REDIS_URL": f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0",
    }
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "manage.py", "runstack"], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60
    )
    said = result.stderr + result.stdout
    assert result.returncode != 0
    assert "REDIS_URL is set to redis://:***@127.0.0.1:" in said
    assert "nothing answers there" in said
    assert "hunter2" not in said
    assert not (tmp_path / "data" / "redis").exists()
    assert not (tmp_path / "data" / "valkey").exists()
