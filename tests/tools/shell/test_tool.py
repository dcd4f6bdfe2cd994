"""The shell tool against the real Docker engine: results, limits at their edges, stopping."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
import uuid

import pytest

from flarebot.core.database import db
from tests.support.tool_context import tool_context
from tests.tools.shell.conftest import call, our_containers, wait_until
from tools.models import ActivityStatus, ShellLease, ToolSlot
from tools.registry import CleanupRequest
from tools.runtime import input_problem
from tools.shell import engine as engine_module
from tools.shell.tool import SHELL, shell_cleanup, shell_summary

pytestmark = pytest.mark.django_db(transaction=True)


async def leases() -> list[ShellLease]:
    return await db(lambda: list(ShellLease.objects.all()))()


async def slots() -> int:
    return await db(lambda: ToolSlot.objects.filter(tool="shell").count())()


async def test_it_returns_the_exit_code_and_both_streams():
    result = await call({"command": "echo hi; echo oops >&2; exit 3"})

    assert result.status == ActivityStatus.SUCCEEDED
    assert result.output == {
        "exit_code": 3,
        "stdout": "hi\n",
        "stderr": "oops\n",
        "truncated": False,
        "timed_out": False,
        "cleanup": "done",
    }
    assert shell_summary(result.output) == "Exit code 3"
    assert await leases() == []
    assert await slots() == 0  # the place was given back


async def test_it_keeps_interleaved_stdout_and_stderr_apart_in_order():
    script = "for i in 1 2 3; do echo out$i; echo err$i >&2; done; printf 'no newline'"

    result = await call({"command": script})

    assert result.output["stdout"] == "out1\nout2\nout3\nno newline"
    assert result.output["stderr"] == "err1\nerr2\nerr3\n"
    assert result.output["exit_code"] == 0


async def test_it_runs_files_written_with_heredocs_in_the_same_command_with_what_is_installed():
    script = """cd /workspace
cat > data.json <<'EOF'
{"items": [1, 2, 3]}
EOF
cat > sum.js <<'EOF'
const d = JSON.parse(require("fs").readFileSync("data.json", "utf8"));
console.log("node", d.items.reduce((a, b) => a + b, 0));
EOF
node sum.js
bun sum.js | sed 's/^node/bun/'
python3 -c 'import json; print("python", sum(json.load(open("data.json"))["items"]))'
jq -c '.items | length' data.json
git --version | cut -d' ' -f1-2
id -u; pwd
"""
    result = await call({"command": script})

    assert result.output["stderr"] == ""
    assert result.output["stdout"] == "node 6\nbun 6\npython 6\n3\ngit version\n1000\n/workspace\n"


async def test_it_starts_every_command_in_a_fresh_container():
    first = await call({"command": "echo kept > /workspace/file; sleep 60 & echo $HOSTNAME"})
    second = await call({"command": "ls -A /workspace; pgrep sleep || echo no-sleep; echo $HOSTNAME"})

    assert first.output["exit_code"] == 0
    assert second.output["stdout"].startswith("no-sleep\n")  # no file, no background process left
    assert second.output["stdout"].split()[-1] == "sandbox"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"command": "true", "timeout_seconds": 45}, None),
        ({"command": "true", "timeout_seconds": 46}, "46 is greater than the maximum of 45"),
        ({"command": "true", "timeout_seconds": 1}, None),
        ({"command": "true", "timeout_seconds": 0}, "0 is less than the minimum of 1"),
        ({"command": "true", "timeout_seconds": 2.5}, "is not of type 'integer'"),
        ({"command": ""}, "should be non-empty"),
        ({"command": "true", "env": {}}, "Additional properties"),
        ({}, "'command' is a required property"),
    ],
)
def test_it_checks_the_input_before_anything_runs(data, problem):
    found = input_problem(SHELL, data)

    assert (found is None) if problem is None else (problem in found), found


async def test_it_runs_with_the_longest_lifetime_and_refuses_one_second_more():
    longest = await call({"command": "echo ok", "timeout_seconds": 45})
    longer = await call({"command": "echo ok", "timeout_seconds": 46})

    assert (longest.status, longest.output["stdout"]) == (ActivityStatus.SUCCEEDED, "ok\n")
    assert (longer.status, longer.output["error"]) == (ActivityStatus.FAILED, "invalid_input")
    assert await leases() == []


async def test_it_accepts_a_command_of_exactly_32_kib_and_refuses_one_byte_more():
    prefix = "echo accepted #"
    exact = prefix + "é" * ((32 * 1024 - len(prefix)) // 2) + "x" * ((32 * 1024 - len(prefix)) % 2)
    assert len(exact.encode()) == 32 * 1024

    accepted = await call({"command": exact})
    refused = await call({"command": exact + "x"})

    assert accepted.output["stdout"] == "accepted\n"
    assert refused.status == ActivityStatus.FAILED
    assert refused.output == {
        "error": "tool_failed",
        "message": "The command is 32769 bytes of UTF-8; at most 32768 are allowed.",
    }
    assert await leases() == []


async def test_it_refuses_a_command_bash_cannot_receive():
    result = await call({"command": "echo a\x00b"})

    assert result.status == ActivityStatus.FAILED
    assert "NUL" in result.output["message"]


async def test_it_stops_at_its_lifetime_and_keeps_what_was_printed():
    started = time.monotonic()
    result = await call({"command": "echo before; sleep 600; echo after", "timeout_seconds": 1})
    took = time.monotonic() - started

    assert result.status == ActivityStatus.SUCCEEDED
    assert result.output["timed_out"] is True
    assert result.output["stdout"] == "before\n"
    assert result.output["cleanup"] == "done"
    assert took < 30  # the 1 s lifetime, then the kill and removal; never the sleep
    assert shell_summary(result.output) == "Stopped at its time limit"


async def test_it_keeps_output_of_exactly_32_kib_whole():
    result = await call({"command": "head -c 32768 /dev/zero | tr '\\0' a"})

    assert result.output["truncated"] is False
    assert result.output["stdout"] == "a" * 32768


async def test_it_cuts_output_at_the_32_kib_byte_across_both_streams_and_stops_the_container():
    script = "head -c 16384 /dev/zero | tr '\\0' e >&2; sleep 0.5; head -c 16385 /dev/zero | tr '\\0' o; sleep 600"
    started = time.monotonic()
    result = await call({"command": script})

    assert result.output["truncated"] is True
    assert result.output["stderr"] == "e" * 16384
    assert result.output["stdout"] == "o" * 16384
    assert result.output["timed_out"] is False
    assert time.monotonic() - started < 25  # stopped at the cap, not at the 30 s lifetime
    assert shell_summary(result.output).endswith("output cut at 32 KiB")


async def test_it_stops_endless_output_at_the_cap():
    result = await call({"command": "yes"})

    assert result.output["truncated"] is True
    assert len(result.output["stdout"].encode()) == 32 * 1024


async def test_it_stops_a_cancelled_call_mid_command_and_keeps_its_partial_output():
    progress: list[dict] = []
    context = tool_context(progress=progress)
    running = asyncio.ensure_future(call({"command": "echo started; sleep 30; echo never"}, context))
    await wait_until(lambda: any(p["message"].startswith("8 bytes") for p in progress), "the command's first output")

    context.cancelled.set()
    result = await running

    # `partial` is there only if the call stopped within the runtime's grace, long before the sleep's end.
    assert result.status == ActivityStatus.CANCELLED
    assert result.output["error"] == "cancelled"
    assert result.output["partial"]["stdout"] == "started\n"
    assert result.output["partial"]["cleanup"] == "done"
    assert await leases() == []
    assert await slots() == 0


async def test_it_reports_bytes_and_elapsed_time_in_its_message_never_the_command_or_output():
    progress: list[dict] = []
    context = tool_context(progress=progress)

    await call({"command": "echo secret-output; sleep 1.2; echo more"}, context)

    printed = len("secret-output\nmore\n")
    running = [p for p in progress if "of output" in p["message"]]
    assert progress[0] == {"message": "Starting the sandbox"}
    assert re.fullmatch(rf"{printed} bytes of output · \d+\.\d s", running[-1]["message"]), running[-1]
    assert float(running[-1]["message"].split(" · ")[1][:-2]) >= 1.2
    assert all("secret" not in p["message"] and "echo" not in p["message"] for p in progress)
    assert all("echo" not in p.get("output", "") for p in progress)  # the command never


async def test_it_reports_what_the_command_printed_so_far_before_it_ends():
    progress: list[dict] = []
    context = tool_context(progress=progress)
    script = "echo first; sleep 0.5; echo oops >&2; sleep 3; echo last"
    running = asyncio.ensure_future(call({"command": script}, context))

    await wait_until(lambda: any(p.get("output") == "first\noops\n" for p in progress), "the output so far")

    assert not running.done()
    result = await running
    assert progress[-1]["output"] == "first\noops\nlast\n"  # both streams, as they arrived
    assert (result.output["stdout"], result.output["stderr"]) == ("first\nlast\n", "oops\n")  # kept apart
    outputs = [p["output"] for p in progress if "output" in p]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(outputs))


async def test_it_reports_a_character_split_between_writes_only_once_it_is_whole():
    progress: list[dict] = []
    context = tool_context(progress=progress)
    running = asyncio.ensure_future(call({"command": "printf 'caf\\xc3'; sleep 2; printf '\\xa9!\\n'"}, context))

    await wait_until(lambda: any(p.get("output") == "caf" for p in progress), "the start of the word")

    assert not running.done()
    result = await running
    assert result.output["stdout"] == "café!\n"
    assert [p["output"] for p in progress if p.get("output", "").startswith("café")][-1] == "café!\n"
    assert all("\ufffd" not in p.get("output", "") for p in progress)


async def test_it_removes_a_container_created_after_its_conversation_was_deleted_without_starting_it(engine):
    context = tool_context(live=lambda: False)

    result = await call({"command": "touch /workspace/started; echo started"}, context)

    assert result.output["not_started"] is True
    assert result.output["exit_code"] is None
    assert result.output["cleanup"] == "done"
    assert shell_summary(result.output) == "Not started"
    assert our_containers(engine) == []
    assert await leases() == []


async def test_it_removes_the_containers_of_a_deleted_conversation(engine):
    conversation_id = uuid.uuid4()
    context = tool_context(conversation_id=conversation_id)
    running = asyncio.ensure_future(call({"command": "echo started; sleep 30"}, context))
    await wait_until(lambda: our_containers(engine) and our_containers(engine)[0].status == "running", "a container")

    await shell_cleanup(CleanupRequest(conversation_id, None, None, "deleted"))

    assert our_containers(engine) == []
    assert await leases() == []
    result = await asyncio.wait_for(running, 10)
    assert result.output["cleanup"] == "done"


async def test_it_says_what_to_do_at_once_when_no_engine_answers(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    started = time.monotonic()

    problem = engine_module.engine_problem(fresh=True)
    result = await call({"command": "echo hi"})

    assert time.monotonic() - started < 10  # no connection attempt waits for a timeout
    assert problem is not None
    assert "no Docker engine answers at unix:///nonexistent/docker.sock" in problem
    assert "dockerd --bridge=none" in problem
    assert (result.status, result.output["error"]) == (ActivityStatus.UNAVAILABLE, "unavailable")
    assert await leases() == []
    monkeypatch.delenv("DOCKER_HOST")
    assert engine_module.engine_problem(fresh=True) is None


async def test_it_says_how_to_build_a_missing_image(monkeypatch):
    monkeypatch.setattr(engine_module, "SANDBOX_IMAGE", "flarebot-sandbox:never-built")

    problem = engine_module.engine_problem(fresh=True)

    assert problem is not None
    assert "no flarebot-sandbox:never-built image" in problem
    assert ".venv/bin/python manage.py build_sandbox_image" in problem
    monkeypatch.undo()
    assert engine_module.engine_problem(fresh=True) is None


async def test_it_fails_with_the_fix_when_the_image_went_away_after_the_check(monkeypatch, engine):
    from tools.registry import ToolFailed
    from tools.shell import sandbox as sandbox_module
    from tools.shell.tool import shell

    monkeypatch.setattr(sandbox_module, "SANDBOX_IMAGE", "flarebot-sandbox:never-built")

    with pytest.raises(ToolFailed) as failed:
        await shell(tool_context(), {"command": "echo hi"})

    assert "no flarebot-sandbox:never-built image" in failed.value.message
    assert ".venv/bin/python manage.py build_sandbox_image" in failed.value.message
    assert await leases() == []
    assert our_containers(engine) == []
