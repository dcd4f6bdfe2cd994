"""The shell tool: one fresh Docker container per command, removed whatever happens.

A call checks its command (at most 32 KiB of UTF-8, no NUL), records its lease, creates
the container, checks it is still wanted (not cancelled, conversation not deleted, no
removal asked), starts it and collects its output until it ends, its lifetime (1-45 s,
30 by default, start-up included) runs out, its output passes 32 KiB, or the call is
stopped; then it removes the container. A removal that fails or is too slow leaves the
lease pending: the call still returns its result with `cleanup: "pending"`, keeps its
place under the limit of 4, and a job retries.

Progress reports carry the byte count and elapsed time in their message and, for the
owner's card alone, the output so far (stdout and stderr as they arrived, at most 32 KiB):
the card shows it live, and the activity's events carry only what is new
(`tools.activity.activity_announced`). The command goes to the transcript's tool part
alone, and the result keeps stdout and stderr apart as before.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import time
import uuid
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from flarebot.core.database import db, on_long_lived_thread
from tools.cleanup_jobs import SHELL_LEASE_CLEANUP, lease_cleanup_enqueue
from tools.kit import call_wanted, card_summary, object_schema
from tools.registry import CleanupRequest, Effect, Tool, ToolContext, ToolFailed
from tools.shell.engine import engine_problem
from tools.shell.files import OUT_BYTES_MAX, OUT_FILES_MAX
from tools.shell.handover import returned_store, sandbox_inputs
from tools.shell.leases import (
    shell_lease_open,
    shell_lease_pending,
    shell_lease_removed,
    shell_lease_settle,
    shell_lease_wanted,
    shell_leases_exist,
    shell_leases_request_removal,
)
from tools.shell.sandbox import (
    CPU_LIMIT,
    MEMORY_LIMIT,
    PIDS_LIMIT,
    REMOVE_TIMEOUT,
    SHELL_THREADS,
    WORKSPACE_SIZE,
    EngineFailed,
    Outcome,
    Sandbox,
    container_remove,
    sandbox_scope,
)

logger = logging.getLogger(__name__)

COMMAND_MAX_BYTES = 32 * 1024
TIMEOUT_DEFAULT = 30
TIMEOUT_MAX = 45
CONCURRENCY = 4
CREATE_TIMEOUT = 10.0  # the engine's client timeout bounds creation
PROGRESS_EVERY = 0.25  # seconds between looks at the counters (the engine writes at most 4 a second)
QUIET_PROGRESS = 1.0  # without new output, elapsed time is reported this often
DELETION_TIMEOUT = 20.0
STOP_WAIT = 4.0  # seconds a stopped call waits for its thread before removing the container

# Calls running in this process, for the cleanup hook of a cancelled or timed-out call.
_running: dict[tuple[uuid.UUID, str], Sandbox] = {}

INPUT_SCHEMA = object_schema(
    {
        "command": {
            "type": "string",
            "minLength": 1,
            # Characters here; the real limit is 32 KiB of UTF-8, checked by the tool.
            "maxLength": COMMAND_MAX_BYTES,
            "description": "The Bash script to run with `bash -c` (at most 32 KiB of UTF-8).",
        },
        "timeout_seconds": {
            "type": "integer",
            "minimum": 1,
            "maximum": TIMEOUT_MAX,
            "description": f"Lifetime of the container in seconds, start-up included (default {TIMEOUT_DEFAULT}).",
        },
    },
    required=["command"],
)


def command_problem(command: str) -> str | None:
    """Why a command cannot be run, or None."""
    if "\x00" in command:
        return "The command contains a NUL character, which Bash cannot receive."
    try:
        size = len(command.encode("utf-8"))
    except UnicodeEncodeError:
        return "The command is not valid Unicode text (it holds a lone surrogate)."
    if size > COMMAND_MAX_BYTES:
        return f"The command is {size} bytes of UTF-8; at most {COMMAND_MAX_BYTES} are allowed."
    return None


async def shell(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
    """Run one command in a fresh sandbox container and return its exit code and output."""
    command: str = data["command"]
    lifetime = int(data.get("timeout_seconds", TIMEOUT_DEFAULT))
    problem = command_problem(command)
    if problem is not None:
        raise ToolFailed(problem)
    begun = time.monotonic()
    scope = await db(sandbox_scope)()
    place = context.place.held if context.place is not None else None
    lease_id = await db(shell_lease_open)(
        conversation_id=context.conversation_id,
        turn_id=context.turn_id,
        tool_call_id=context.tool_call_id,
        expires_at=timezone.now() + timedelta(seconds=lifetime + CREATE_TIMEOUT + REMOVE_TIMEOUT),
        place=place,
    )
    inputs, not_copied = await sandbox_inputs(context.conversation_id)
    sandbox = Sandbox(lease_id=lease_id, command=command, deadline=begun + lifetime, scope=scope, inputs=inputs)
    key = (context.turn_id, context.tool_call_id)
    _running[key] = sandbox
    outcome: Outcome | None = None
    failed: str | None = None
    try:
        outcome = await _drive(context, sandbox)
    except EngineFailed as engine:
        failed = str(engine)
    except asyncio.CancelledError:
        # Stopped by the engine (cancel or deadline): the container is killed and removed
        # below, and what it printed goes back; the runtime keeps it as partial output.
        outcome = sandbox.outcome()
    finally:
        _running.pop(key, None)
        removed = await asyncio.shield(_remove(sandbox))
        if not removed and context.place is not None:
            context.place.keep()  # the pending lease holds the place until the job removes it
    if failed is not None:
        raise ToolFailed(failed + ("" if removed else " Its removal is pending."))
    result = _result(outcome, removed)
    if inputs:
        result["attachments_copied"] = [item.name for item in inputs]
    if not_copied:
        result["attachments_not_copied"] = not_copied
    if sandbox.returned is not None:
        result.update(await returned_store(context, sandbox.returned))
    return result


async def _drive(context: ToolContext, sandbox: Sandbox) -> Outcome | None:
    await context.report_progress({"message": "Starting the sandbox"})

    def still_wanted() -> bool:
        with transaction.atomic():
            return call_wanted(context) and shell_lease_wanted(lease_id=sandbox.lease_id)

    def wanted() -> bool:
        return on_long_lived_thread(still_wanted)

    reporter = asyncio.ensure_future(_report(context, sandbox))
    work = asyncio.get_running_loop().run_in_executor(SHELL_THREADS, sandbox.lifecycle, wanted)
    try:
        outcome = await asyncio.shield(work)
        reporter.cancel()
        if outcome is not None:
            await _report_now(context, sandbox)  # the final counts, with the call's last update
        return outcome
    except asyncio.CancelledError:
        sandbox.stop.set()
        # The thread kills the container and ends within a moment (or finishes creating it):
        # only then is the removal sure to find what it must remove.
        await asyncio.wait({work}, timeout=STOP_WAIT)
        raise
    finally:
        reporter.cancel()


async def _report(context: ToolContext, sandbox: Sandbox) -> None:
    reported: tuple[int, float] | None = None
    while True:
        await asyncio.sleep(PROGRESS_EVERY)
        if sandbox.started_at is None:
            continue
        now = time.monotonic()
        count = sandbox.output_bytes
        if reported is None or count != reported[0] or now - reported[1] >= QUIET_PROGRESS:
            reported = (count, now)
            await _report_now(context, sandbox)


async def _report_now(context: ToolContext, sandbox: Sandbox) -> None:
    """Report the bytes of output kept so far, the time since the start, and the output itself."""
    if sandbox.started_at is None:
        return
    count = sandbox.output_bytes
    elapsed = time.monotonic() - sandbox.started_at
    # Counts in the message only: a bar of done/total would read as progress toward the cap.
    message = f"{_bytes(count)} of output · {elapsed:.1f} s"
    await context.report_progress({"message": message, "output": _text_so_far(bytes(sandbox.combined))})


def _text_so_far(data: bytes) -> str:
    """Decode output that may end inside a character: that character waits for the next report.

    Each report's text then starts with the one before, which the card's events rely on.
    """
    return codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=False)


def _bytes(count: int) -> str:
    return f"{count} bytes" if count < 1024 else f"{count / 1024:.1f} KiB"


async def _remove(sandbox: Sandbox) -> bool:
    """Remove the call's container; record the outcome on its lease. True when confirmed."""
    loop = asyncio.get_running_loop()
    try:
        removed = await asyncio.wait_for(
            loop.run_in_executor(SHELL_THREADS, container_remove, sandbox.name), REMOVE_TIMEOUT
        )
    except TimeoutError:
        removed = False
    try:
        if removed:
            await db(shell_lease_removed)(lease_id=sandbox.lease_id)
        else:
            await db(shell_lease_pending)(lease_id=sandbox.lease_id)
            await loop.run_in_executor(None, _cleanup_enqueue, sandbox.lease_id)
    except Exception:
        logger.exception("recording the removal of shell container %s failed; the sweep settles it", sandbox.name)
    return removed


def _cleanup_enqueue(lease_id: uuid.UUID) -> None:
    lease_cleanup_enqueue(SHELL_LEASE_CLEANUP, lease_id, countdown=REMOVE_TIMEOUT)


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _result(outcome: Outcome | None, removed: bool) -> dict[str, Any]:
    cleanup = "done" if removed else "pending"
    if outcome is None:
        return {
            "exit_code": None,
            "stdout": "",
            "stderr": "",
            "truncated": False,
            "timed_out": False,
            "cleanup": cleanup,
            "not_started": True,
        }
    return {
        "exit_code": outcome.exit_code,
        "stdout": _text(outcome.stdout),
        "stderr": _text(outcome.stderr),
        "truncated": outcome.truncated,
        "timed_out": outcome.timed_out,
        "cleanup": cleanup,
    }


def _ended(output: dict[str, Any]) -> str:
    """How the command ended, never what it printed."""
    parts = []
    if output.get("not_started"):
        parts.append("Not started")
    elif output.get("timed_out"):
        parts.append("Stopped at its time limit")
    elif output.get("exit_code") is not None:
        parts.append(f"Exit code {output['exit_code']}")
    if output.get("truncated"):
        parts.append("output cut at 32 KiB")
    if output.get("cleanup") == "pending":
        parts.append("container removal pending")
    return ", ".join(parts)


shell_summary = card_summary(_ended)  # the card's summary


async def shell_available(context: ToolContext) -> str | None:
    return await asyncio.get_running_loop().run_in_executor(SHELL_THREADS, engine_problem)


async def shell_cleanup(request: CleanupRequest) -> None:
    """Stop a cancelled or timed-out call's container, or remove every container of a deleted conversation."""
    if request.reason != "deleted":
        assert request.turn_id is not None
        assert request.tool_call_id is not None
        sandbox = _running.get((request.turn_id, request.tool_call_id))
        if sandbox is not None:
            sandbox.stop.set()  # its call removes it on the way out
        return
    if not await db(shell_leases_exist)(conversation_id=request.conversation_id):
        return  # the common case, answered by a read alone
    lease_ids = await db(shell_leases_request_removal)(conversation_id=request.conversation_id)
    loop = asyncio.get_running_loop()
    for lease_id in lease_ids:
        settled = await asyncio.wait_for(loop.run_in_executor(SHELL_THREADS, _settle, lease_id), DELETION_TIMEOUT)
        if not settled:
            raise RuntimeError("a shell container of the deleted conversation could not be removed yet")


def _settle(lease_id: uuid.UUID) -> bool:
    return on_long_lived_thread(shell_lease_settle, lease_id=lease_id)


DESCRIPTION = (
    "Run a Bash command in a fresh, throwaway Linux container (Debian bookworm) and get its exit code, "
    "stdout and stderr. Installed: bash, coreutils, python3, node (Node.js 18), bun, git, curl, jq. "
    "The working directory /workspace is empty and temporary; write files there with heredocs and use "
    "them in the same command: nothing survives the call, and background processes end with it. "
    f"Limits: {TIMEOUT_DEFAULT} s by default (timeout_seconds 1-{TIMEOUT_MAX}, start-up included), "
    f"32 KiB of output (stdout and stderr together; the container is stopped when it is reached), "
    f"{MEMORY_LIMIT // (1024 * 1024)} MiB of memory, {CPU_LIMIT:g} CPU, {PIDS_LIMIT} processes, "
    f"{WORKSPACE_SIZE.rstrip('m')} MiB in /workspace. "
    "No network unless the operator enabled one. No secrets are available inside. "
    "The conversation's attachments are in /workspace/attachments (read-only). To hand files back to the "
    f"user, write them to /workspace/out/ (mkdir -p it): at most {OUT_FILES_MAX} regular files, "
    f"{OUT_BYTES_MAX // (1024 * 1024)} MB in all, of the types attachments take (images, PDF, text, CSV, JSON); "
    "they come back when the command ends by itself (not when stopped, timed out or its output was cut)."
)

SHELL = Tool(
    name="shell",
    description=DESCRIPTION,
    input_schema=INPUT_SCHEMA,
    run=shell,
    # The longest lifetime, then creation and removal: the engine's deadline is a backstop.
    deadline=TIMEOUT_MAX + CREATE_TIMEOUT + REMOVE_TIMEOUT + 5,
    effect=Effect.EFFECT,
    label="Running a shell command",
    done_label="Ran a shell command",
    summarize=shell_summary,
    available=shell_available,
    concurrency=CONCURRENCY,
    concurrency_wait=False,
    cleanup=shell_cleanup,
    keeps_partial=True,
)
