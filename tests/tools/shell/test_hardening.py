"""What a command can and cannot do inside its container: no network, no secrets, no root, bounded."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.tools.shell.conftest import call
from tools.shell.engine import SANDBOX_IMAGE
from tools.shell.sandbox import CPU_LIMIT, MASKED_PATHS, MEMORY_LIMIT, PIDS_LIMIT

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-ant-api03-ThisMustNeverReachTheSandbox0042"


async def run(command: str, **data) -> dict:
    result = await call({"command": command, **data})
    assert result.output.get("cleanup") == "done", result.output
    return result.output


async def test_it_has_no_network_at_all():
    # Only addresses of the container's own namespace are tried: even if the code under
    # test gave it a network, nothing here could leave the machine.
    output = await run(
        "ls /sys/class/net; echo routes: $(tail -n +2 /proc/net/route | wc -l); "
        "curl -sS -m 3 http://127.0.0.1:9/ 2>&1 | head -c 120; echo; "
        "(exec 3<>/dev/tcp/127.0.0.1/9) 2>&1 | head -c 80"
    )

    lines = output["stdout"].splitlines()
    assert lines[:2] == ["lo", "routes: 0"]  # a loopback interface and not a single route
    assert "Failed to connect to 127.0.0.1" in lines[2]


async def test_it_passes_none_of_our_environment_in(monkeypatch):
    monkeypatch.setenv("FLAREBOT_TEST_SANDBOX_SECRET", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)

    output = await run("env; cat /proc/1/environ | tr '\\0' '\\n'")

    names = {line.split("=", 1)[0] for line in output["stdout"].splitlines() if "=" in line}
    assert SECRET not in output["stdout"]
    assert names <= {"HOME", "PATH", "LANG", "HOSTNAME", "PWD", "SHLVL", "_"}, names


async def test_it_runs_as_a_user_without_privileges_on_a_read_only_root():
    output = await run(
        "id -u; id -g; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status | tr -s '\\t' ' '; "
        "touch /etc/flarebot 2>&1; touch /usr/bin/x 2>&1; echo data > /workspace/f && cat /workspace/f; "
        "echo tmp > /tmp/f && cat /tmp/f; su -c true 2>&1 | head -c 60; echo; mount | grep ' / '"
    )

    lines = output["stdout"].splitlines()
    assert lines[:2] == ["1000", "1000"]
    assert lines[2:5] == ["CapEff: 0000000000000000", "CapBnd: 0000000000000000", "NoNewPrivs: 1"]
    assert "Read-only file system" in lines[5]
    assert "Read-only file system" in lines[6]
    assert lines[7:9] == ["data", "tmp"]
    assert " ro," in lines[-1] or "(ro," in lines[-1]


async def test_it_holds_the_pids_memory_cpu_and_workspace_limits():
    output = await run(
        "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes "
        "/sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us 2>/dev/null "
        "|| cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max; "
        "df -k /workspace | tail -n 1 | tr -s ' ' | cut -d' ' -f2; "
        "head -c 70000000 /dev/zero > /workspace/big"
    )

    lines = output["stdout"].splitlines()
    values = " ".join(lines[:-1]).split()
    assert values[0] == str(PIDS_LIMIT)
    assert values[1] == str(MEMORY_LIMIT)
    assert int(values[2]) / int(values[3]) == CPU_LIMIT
    assert lines[-1] == str(64 * 1024)  # KiB of /workspace
    assert "No space left on device" in output["stderr"]


async def test_it_contains_a_fork_bomb_with_its_pids_limit():
    started = time.monotonic()

    # The first shell stays to watch (its own forks fail too) until the lifetime ends.
    output = await run(":(){ :|:& };:; sleep 600", timeout_seconds=5)

    assert time.monotonic() - started < 30  # the 5 s lifetime, never the sleep
    assert output["timed_out"] is True or output["exit_code"] is not None
    assert "Resource temporarily unavailable" in output["stderr"]
    # The machine is still fine: the next command runs as usual.
    assert (await run("echo alive"))["stdout"] == "alive\n"


async def test_it_stops_a_command_that_takes_all_its_memory():
    output = await run("python3 -c 'x = bytearray(900 * 1024 * 1024)'; echo exit=$?")

    assert output["stdout"].strip() in {"exit=137", "exit=1"}  # killed by the OOM killer, or MemoryError


async def test_it_shows_nothing_of_the_host_kernels_configuration_or_boot_command_line():
    output = await run(
        "wc -c < /proc/config.gz; wc -c < /proc/cmdline; wc -c < /proc/timer_list; "
        "zcat /proc/config.gz | head -c 200; cat /proc/cmdline | head -c 200"
    )

    # The last of the three: one of the engine's own masks, still there.
    assert output["stdout"] == "0\n0\n0\n"
    assert "unexpected end of file" in output["stderr"]


def test_the_masked_paths_keep_every_one_the_engine_masks_by_default(engine):
    # A list given replaces the engine's defaults: a path the engine masks by default and
    # MASKED_PATHS lacks would be readable in the sandbox but not in a plain container.
    container = engine.api.create_container(
        SANDBOX_IMAGE, command=["true"], name=f"flarebot-defaults-{uuid.uuid4().hex[:12]}", network_disabled=True
    )
    try:
        defaults = engine.api.inspect_container(container["Id"])["HostConfig"]["MaskedPaths"]
    finally:
        engine.api.remove_container(container["Id"], force=True)

    assert defaults
    assert set(defaults) <= set(MASKED_PATHS)
