"""Shell leases across processes: the limit of 4, killed workers, pending removals, orphans."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from flarebot.core.env import BASE_DIR
from tests.support.live import database_url
from tests.tools.shell.conftest import our_containers
from tools.jobs import shell_lease_cleanup, shell_leases_sweep
from tools.models import ShellLease, ShellLeaseState, ToolSlot
from tools.shell.leases import (
    shell_lease_open,
    shell_lease_pending,
    shell_lease_settle,
    shell_leases_reconcile,
)
from tools.shell.sandbox import Sandbox, container_name, sandbox_scope
from tools.shell.tool import shell_summary
from tools.slots import slot_acquire
from tools.web.leases import holder_alive

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]

HOUR = timedelta(hours=1)


def start_worker(calls: int, command: str, conversation_id: uuid.UUID | None = None) -> subprocess.Popen:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flarebot.settings", "DATABASE_URL": database_url()}
    argv = [sys.executable, "-m", "tests.support.shell_process", str(conversation_id or uuid.uuid4()), str(calls)]
    return subprocess.Popen(
        [*argv, command], cwd=BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(check, what: str, timeout: float = 30.0):
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def running(engine) -> list:
    return [c for c in our_containers(engine) if c.status == "running"]


def fifth_call() -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "flarebot.settings", "DATABASE_URL": database_url()}
    argv = [sys.executable, "-m", "tests.support.shell_process", str(uuid.uuid4()), "1", "echo fifth"]
    return subprocess.run(argv, cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_it_refuses_a_fifth_call_at_once_while_another_worker_runs_four(engine):
    # The four hold their places far longer than a process takes to start, even on a busy
    # machine; a fifth call that waited for a place would have run after them instead.
    worker = start_worker(4, "echo started; sleep 20; echo done")
    try:
        wait_for(lambda: len(running(engine)) == 4, "four running containers")
        refused = fifth_call()
        still_running = len(running(engine))
        out, err = worker.communicate(timeout=90)
    finally:
        if worker.poll() is None:
            worker.kill()

    assert refused.returncode == 0, refused.stderr
    [fifth] = [json.loads(line) for line in refused.stdout.splitlines()]
    assert fifth["status"] == "failed"
    assert fifth["output"]["error"] == "busy"
    assert "4 calls already run at once" in fifth["output"]["message"]
    assert still_running == 4  # refused while the four ran, not after them
    assert worker.returncode == 0, err
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["output"]["stdout"] for r in results] == ["started\ndone\n"] * 4
    assert not ShellLease.objects.exists()
    assert not ToolSlot.objects.exists()


def test_it_removes_the_container_of_a_worker_killed_mid_command(engine):
    conversation_id = uuid.uuid4()
    worker = start_worker(1, "echo started; sleep 40", conversation_id)
    try:
        [container] = wait_for(lambda: running(engine), "the running container")
        lease = ShellLease.objects.get(conversation_id=conversation_id)
        assert container.name == container_name(lease.id)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)

    assert holder_alive(lease.holder) is False
    assert [c.name for c in running(engine)] == [container.name]  # the command still runs
    assert shell_leases_reconcile() == 1
    assert our_containers(engine) == []
    assert not ShellLease.objects.exists()
    assert not ToolSlot.objects.exists()  # its place was given back too
    assert shell_leases_reconcile() == 0


def test_a_lease_whose_removal_is_pending_keeps_counting_toward_the_limit(engine):
    place = slot_acquire(tool="shell", limit=4, hold_for=HOUR)
    lease_id = shell_lease_open(
        conversation_id=uuid.uuid4(),
        turn_id=uuid.uuid4(),
        tool_call_id="c1",
        expires_at=timezone.now() + HOUR,
        place=place,
    )
    Sandbox(lease_id=lease_id, command="true", deadline=time.monotonic() + 30, scope=sandbox_scope()).create()

    shell_lease_pending(lease_id=lease_id)  # its removal failed

    lease = ShellLease.objects.get(id=lease_id)
    assert (lease.state, lease.cleanup_attempts) == (ShellLeaseState.PENDING, 1)
    others = [slot_acquire(tool="shell", limit=4, hold_for=HOUR) for _ in range(4)]
    assert [o is not None for o in others] == [True, True, True, False]
    shell_lease_cleanup(str(lease_id))  # the job's retry succeeds
    assert not ShellLease.objects.filter(id=lease_id).exists()
    assert our_containers(engine) == []
    assert slot_acquire(tool="shell", limit=4, hold_for=HOUR) is not None  # its place is free again


def test_it_settles_a_lease_whose_container_was_never_created():
    lease_id = shell_lease_open(
        conversation_id=uuid.uuid4(), turn_id=uuid.uuid4(), tool_call_id="c1", expires_at=timezone.now(), place=None
    )

    assert shell_lease_settle(lease_id=lease_id) is True
    assert not ShellLease.objects.exists()


def test_the_sweep_removes_containers_of_this_installation_that_no_lease_explains(engine):
    orphan = Sandbox(lease_id=uuid.uuid4(), command="sleep 30", deadline=time.monotonic() + 30, scope=sandbox_scope())
    foreign = Sandbox(lease_id=uuid.uuid4(), command="sleep 30", deadline=time.monotonic() + 30, scope="another")
    orphan.create()
    foreign.create()
    try:
        shell_leases_sweep()

        assert our_containers(engine) == []
        assert engine.containers.get(foreign.name).name == foreign.name  # another installation's: untouched
    finally:
        engine.containers.get(foreign.name).remove(force=True)


def test_the_sweep_settles_expired_leases():
    lease_id = shell_lease_open(
        conversation_id=uuid.uuid4(),
        turn_id=uuid.uuid4(),
        tool_call_id="c1",
        expires_at=timezone.now() - timedelta(minutes=5),
        place=None,
    )

    shell_leases_sweep()

    assert not ShellLease.objects.filter(id=lease_id).exists()


def test_a_removal_the_engine_does_not_confirm_is_pending_keeps_its_place_and_is_retried(engine, monkeypatch):
    from tests.support.frozen_engine import frozen_engine
    from tests.support.tool_context import tool_context
    from tests.tools.shell.conftest import call
    from tools.models import ActivityStatus
    from tools.shell import engine as shell_engine

    conversation_id = uuid.uuid4()
    progress: list[dict] = []
    context = tool_context(conversation_id=conversation_id, progress=progress)

    async def scenario(frozen):
        running = asyncio.ensure_future(call({"command": "echo started; sleep 60", "timeout_seconds": 3}, context))
        while not any(p["message"].startswith("8 bytes") for p in progress):
            await asyncio.sleep(0.05)
        # The engine stops answering this process (the container keeps running): the kill,
        # the wait and the removal all go unanswered.
        frozen.freeze()
        try:
            return await running
        finally:
            frozen.thaw()

    with monkeypatch.context() as patched, frozen_engine() as frozen:
        patched.setenv("DOCKER_HOST", frozen.url)
        patched.setattr(shell_engine, "_client", None)  # this call connects through it; the next ones directly
        result = asyncio.run(scenario(frozen))

    assert result.status == ActivityStatus.SUCCEEDED
    assert result.output["cleanup"] == "pending"
    assert result.output["stdout"] == "started\n"
    assert "container removal pending" in shell_summary(result.output)
    lease = ShellLease.objects.get(conversation_id=conversation_id)
    assert (lease.state, lease.cleanup_attempts) == (ShellLeaseState.PENDING, 1)
    assert ToolSlot.objects.filter(tool="shell", holder=lease.slot_holder).exists()  # it still counts toward 4

    shell_lease_cleanup(str(lease.id))  # the job's retry, with the engine back

    assert not ShellLease.objects.exists()
    assert not ToolSlot.objects.exists()
    assert our_containers(engine) == []
