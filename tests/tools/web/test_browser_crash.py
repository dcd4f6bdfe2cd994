"""A worker killed with SIGKILL while browser_read holds a context: its lease is reconciled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from flarebot.core.env import BASE_DIR
from tests.support.live import database_url
from tools.models import BrowserLease, BrowserLeaseState
from tools.web.leases import BROWSER_MARK, browser_leases_reconcile, holder_alive, holder_token

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.database,
]


def browsers_marked(holder: str) -> list[int]:
    mark = f"{BROWSER_MARK}{holder_token(holder)}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark in (entry / "cmdline").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def wait_for(check, what: str, timeout: float = 30.0):
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_it_closes_the_lease_of_a_killed_worker_and_leaves_no_browser_behind(web):
    conversation_id = uuid.uuid4()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flarebot.settings", "DATABASE_URL": database_url()}
    command = [sys.executable, "-m", "tests.support.browser_process", str(conversation_id), web.url("/slow-headers")]
    process = subprocess.Popen(command, cwd=BASE_DIR, env=env, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: "/slow-headers" in web.paths(), "the page request")
        lease = BrowserLease.objects.get(conversation_id=conversation_id)
        assert lease.state == BrowserLeaseState.OPEN
        assert wait_for(lambda: browsers_marked(lease.holder), "the worker's browser")
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)

    assert holder_alive(lease.holder) is False
    assert browser_leases_reconcile() == 1
    lease.refresh_from_db()
    assert (lease.state, lease.closed_at is not None) == (BrowserLeaseState.CLOSED, True)
    wait_for(lambda: not browsers_marked(lease.holder), "the killed worker's browser to be gone", timeout=10)
    assert browser_leases_reconcile() == 0
