"""`manage.py runstack` (what `make run` ends in): starts everything, Ctrl-C stops everything."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

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


def _command_of(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


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


@contextlib.contextmanager
def _running(tmp_path: Path, port: int) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """`runstack` started and past its address line: the process and the lines it printed so far."""
    process = _runstack(tmp_path, os.environ["REDIS_URL"], port)
    seen: list[str] = []
    assert process.stdout is not None
    stdout: IO[str] = process.stdout
    reader = threading.Thread(target=lambda: seen.extend(iter(stdout.readline, "")), daemon=True)
    reader.start()
    try:
        assert _wait(lambda: any(line.startswith("Open http") for line in seen), 90), "".join(seen)
        yield process, seen
    finally:
        if process.poll() is None:
            process.kill()
        reader.join(timeout=5)


def test_it_runs_every_process_and_stops_them_all_on_ctrl_c(tmp_path):
    port = free_port()
    with _running(tmp_path, port) as (process, seen):
        assert _status_ok(port)
        # The helper that printed the setup link and the address is gone: only the stack stays.
        assert _wait(lambda: not [c for c in _children_of(process.pid) if "--report" in _command_of(c)], 30)
        children = _children_of(process.pid)
        assert len(children) >= 3  # web, worker, beat (and the worker's own threads' processes)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
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


def _cookie(response: httpx.Response, name: str) -> str:
    """A Secure cookie's value (httpx's jar keeps them from plain http, as curl does not)."""
    for header in response.headers.get_list("set-cookie"):
        key, _, rest = header.partition("=")
        if key == name:
            return rest.split(";", 1)[0]
    raise AssertionError(f"no {name} cookie")


def test_it_prints_a_one_time_setup_link_that_creates_the_owner_in_the_browser(tmp_path):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    token_file = tmp_path / "data" / "setup_token"
    with _running(tmp_path, port) as (process, seen):
        links = [line.strip() for line in seen if "/setup/?token=" in line]
        assert len(links) == 1, "".join(seen)
        assert links[0].startswith(f"{base}/setup/?token=")
        token = links[0].rpartition("=")[2]
        assert len(token) == 22
        assert token_file.read_text() == token
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert any(".venv/bin/python manage.py createowner --username NAME" in line for line in seen)

        with httpx.Client(base_url=base, headers={"Origin": base}, timeout=10) as browser:
            form = browser.get(f"/setup/?token={token}")
            assert form.status_code == 200
            csrf = form.text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
            fields = {"csrfmiddlewaretoken": csrf, "token": token, "username": "alice"}
            fields |= {
                "password": "a-long-first-owner-passphrase-7",
                "password_again": "a-long-first-owner-passphrase-7",
            }
            csrf_cookie = f"__Host-flarebot-csrf={_cookie(form, '__Host-flarebot-csrf')}"
            created = browser.post("/setup/", data=fields, headers={"Cookie": csrf_cookie})
            assert created.status_code == 302, created.text
            session = f"__Host-flarebot-session={_cookie(created, '__Host-flarebot-session')}"
            assert browser.get("/api/conversations/", headers={"Cookie": session}).status_code == 200
            assert browser.get(f"/setup/?token={token}").status_code == 404
        assert not token_file.exists()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    # The token was on the screen and in its file, nowhere else: no log holds it.
    written = [path for path in (tmp_path / "data").rglob("*") if path.is_file()]
    assert any(path.suffix == ".log" for path in written)
    assert [path for path in written if token.encode() in path.read_bytes()] == []


def test_it_forgets_the_setup_link_when_it_stops(tmp_path):
    with _running(tmp_path, free_port()) as (process, _):
        assert (tmp_path / "data" / "setup_token").exists()
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)

    assert not (tmp_path / "data" / "setup_token").exists()


def test_it_says_the_port_is_taken_and_starts_nothing(tmp_path):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "flarebot.settings",
            "FLAREBOT_DATA_DIR": str(tmp_path / "data"),
            "FLAREBOT_PORT": str(port),
        }
        env.pop("DATABASE_URL", None)
        result = subprocess.run(
            [sys.executable, "manage.py", "runstack"], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60
        )

    assert result.returncode == 1
    said = result.stderr + result.stdout
    assert f"Port {port} on 127.0.0.1 is already in use" in said
    assert f"FLAREBOT_PORT={port + 1} make run" in said
    assert not [line for line in said.splitlines() if line.endswith(" ready")]
    assert "Traceback" not in said
    assert list((tmp_path / "data" / "logs").glob("*.log")) == []  # no process was started


def test_it_stops_with_a_clear_message_when_the_redis_url_set_answers_not(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flarebot.settings",
        "FLAREBOT_DATA_DIR": str(tmp_path / "data"),
        # Set by the operator, on loopback, with nothing listening: it is never replaced
        # by a private server, even though one could be started there.
        "REDIS_URL": f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0",
        "FLAREBOT_PORT": str(free_port()),  # not the live stack's, which is taken
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


def _times_ready(seen: list[str], name: str) -> int:
    return sum(line.split()[:2] == [name, "ready"] for line in seen)


def _worker_pids(supervisor: int) -> set[int]:
    return {c for c in _children_of(supervisor) if " flarebot worker " in f" {_command_of(c)} "}


def test_it_starts_a_crashed_worker_again_and_keeps_serving(tmp_path):
    port = free_port()
    with _running(tmp_path, port) as (process, seen):
        [worker] = _worker_pids(process.pid)
        assert _times_ready(seen, "worker") == 1

        os.kill(worker, signal.SIGKILL)

        assert _wait(lambda: any("worker exited (code -9); starting it again in 1 s" in line for line in seen), 10)
        assert _wait(lambda: _times_ready(seen, "worker") == 2, 60), "".join(seen)
        [again] = _worker_pids(process.pid)
        assert again != worker
        assert process.poll() is None
        assert _status_ok(port)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    assert process.returncode == 0
    assert "stopping the others" not in "".join(seen)
