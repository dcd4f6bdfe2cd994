"""One shell container's life on the engine: create, start, collect its output, remove.

Everything here blocks (the `docker` SDK is synchronous) and runs on the shell's own
threads (`SHELL_THREADS`), never on the event loop that streams turns. A `Sandbox` is
driven by its call (`tools.shell.tool`), which may set `stop` at any moment from the loop:
the collecting thread then kills the container within `POLL` seconds.

The container: the sandbox image as uid 1000, `bash -c` the command under
`timeout -s KILL` (so it ends itself even if no worker is left to kill it), a read-only
root with tmpfs `/workspace` (its working directory and home) and `/tmp`, every
capability dropped, `no-new-privileges`, pids, memory and CPU limits, no environment
of ours, no mounts, no published ports, no log driver (output is read through attach
only), host details in /proc masked (`MASKED_PATHS`), and network `none` unless the
operator named one (`FLAREBOT_SHELL_NETWORK`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

from tools.shell.attach import STDERR, STDOUT, Attached, Frames, exec_attach
from tools.shell.engine import (
    BUILD_IMAGE,
    LABEL,
    LABEL_LEASE,
    LABEL_SCOPE,
    SANDBOX_IMAGE,
    SANDBOX_UID,
    WORKSPACE,
    engine_client,
)
from tools.shell.files import ATTACHMENTS_DIR, Returned, SandboxInput, collect_out, copy_in

logger = logging.getLogger(__name__)

# Limits of every container (the README states them; change both together).
PIDS_LIMIT = 128
MEMORY_LIMIT = 512 * 1024 * 1024  # bytes, swap included (no swap)
CPU_LIMIT = 1.0  # cores
WORKSPACE_SIZE = "64m"
TMP_SIZE = "16m"
NOFILE_LIMIT = 1024
USER = f"{SANDBOX_UID}:{SANDBOX_UID}"

# Paths of /proc and /sys the container sees as empty (the engine mounts /dev/null or a
# read-only tmpfs over them). A list given replaces the engine's own, so the engine's
# defaults (moby's `oci.DefaultSpec`, checked against the engine by the hardening tests)
# come first; then what tells of the host: its kernel's build configuration and its boot
# command line. The mount table (`/proc/self/mounts`) cannot be masked by path: each
# process has its own, and a mask covers only the process that set it up.
MASKED_PATHS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
    "/proc/config.gz",
    "/proc/cmdline",
)

OUTPUT_CAP = 32 * 1024  # bytes of stdout and stderr together
POLL = 0.1  # seconds between looks at `stop` and the deadline while output is awaited
DRAIN = 3.0  # seconds to wait for the stream's end after a kill
REMOVE_TIMEOUT = 10.0  # seconds a removal may take before it counts as pending
# The container's own clock runs this much past the call's lifetime: the call kills it
# first, the container's `timeout` only matters when no call is left to do it.
SELF_KILL_MARGIN = 0.5
# The container outlives the command by this much, for /workspace/out to be read from it.
COLLECT_MARGIN = 15.0
# What runs the command (with `docker exec`, so that the container is still there once it
# ended): the command, then every process it left behind killed (`kill -1` spares the
# caller and the container's init, which only sleeps out the lifetime), so the
# output stream ends with the command and nothing writes to out/ while it is read.
RUNNER = 'bash -c "$1"; code=$?; kill -KILL -1 2>/dev/null; exit "$code"'

KILLED = 128 + 9  # the exit status of a process ended by SIGKILL
# Threads of this process that talk to the engine: at most 4 calls run at once across
# the installation, so a few more cover removals retried meanwhile.
SHELL_THREADS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="shell")


class EngineFailed(Exception):
    """The engine refused or did not answer; the message is safe to show."""


def container_name(lease_id: uuid.UUID) -> str:
    return f"flarebot-sh-{lease_id.hex}"


def sandbox_scope() -> str:
    """Which installation's containers these are: a digest of the database they are leased in.

    Several installations (or test runs) may share one engine; each reconciles only the
    containers of its own scope, so none removes another's.
    """
    db = connection.settings_dict
    identity = f"{connection.vendor}|{db.get('HOST') or ''}|{db.get('PORT') or ''}|{db.get('NAME')}"
    return hashlib.sha256(identity.encode()).hexdigest()[:24]


@dataclass
class Outcome:
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    truncated: bool
    timed_out: bool
    stopped: bool  # the call was cancelled, or its container removed from outside


@dataclass
class Sandbox:
    """One call's container, driven from the shell threads.

    What it printed is kept on the object as it arrives, so a call stopped from the loop
    can still hand back the partial output (`outcome`).
    """

    lease_id: uuid.UUID
    command: str
    deadline: float  # time.monotonic() at which the call's lifetime ends
    scope: str
    stop: threading.Event = field(default_factory=threading.Event)
    output_bytes: int = 0  # bytes of output kept so far (read by the progress reports)
    started_at: float | None = None  # time.monotonic() when it started
    inputs: list[SandboxInput] = field(default_factory=list)  # attachments copied in
    returned: Returned | None = None  # what came back from /workspace/out (after a command that ended itself)
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    # Both streams as they arrived, for the card's live view (the result keeps them apart).
    combined: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    timed_out: bool = False
    stopped: bool = False
    exit_code: int | None = None
    exec_id: str = ""

    @property
    def name(self) -> str:
        return container_name(self.lease_id)

    def outcome(self) -> Outcome | None:
        """What the container did so far; None when it never started."""
        if self.started_at is None:
            return None
        return Outcome(
            self.exit_code, bytes(self.stdout), bytes(self.stderr), self.truncated, self.timed_out, self.stopped
        )

    def lifecycle(self, still_wanted: Callable[[], bool]) -> Outcome | None:
        """Create the container, start it if still wanted, and collect its output; None if not started.

        Raises EngineFailed. Removal is the caller's, whatever happened.
        """
        self.create()
        if self.stop.is_set() or time.monotonic() >= self.deadline or not still_wanted():
            return None  # created after its call was stopped: removed without ever starting
        self.run()
        if self.exit_code is not None and not (self.stopped or self.timed_out or self.truncated):
            self.returned = collect_out(engine_client().api, self.name, USER)
        return self.outcome()

    def create(self) -> None:
        """Create the container (not started); raises EngineFailed."""
        from docker.errors import DockerException, ImageNotFound  # the Docker SDK loads on first use
        from docker.types import Mount, Ulimit  # the Docker SDK loads on first use
        from requests.exceptions import RequestException  # as does requests, under it

        remaining = max(0.0, self.deadline - time.monotonic())
        lifetime = f"{remaining + SELF_KILL_MARGIN + COLLECT_MARGIN:.2f}"
        network = settings.CONFIG.shell_network
        api = engine_client().api
        host_config = api.create_host_config(
            network_mode=network or "none",
            read_only=True,
            tmpfs={
                WORKSPACE: f"rw,exec,nosuid,nodev,size={WORKSPACE_SIZE},uid={SANDBOX_UID},gid={SANDBOX_UID}",
                "/tmp": f"rw,exec,nosuid,nodev,size={TMP_SIZE},uid={SANDBOX_UID},gid={SANDBOX_UID}",  # noqa: S108 (the container's own)
            },
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=PIDS_LIMIT,
            mem_limit=MEMORY_LIMIT,
            memswap_limit=MEMORY_LIMIT,
            nano_cpus=int(CPU_LIMIT * 1e9),
            ulimits=[Ulimit(name="nofile", soft=NOFILE_LIMIT, hard=NOFILE_LIMIT)],
            log_config={"type": "none"},
            shm_size="16m",
            # An anonymous volume (it goes with the container) for the attachments copied in.
            mounts=[Mount(target=ATTACHMENTS_DIR, source=None, type="volume")] if self.inputs else None,
        )
        host_config["MaskedPaths"] = list(MASKED_PATHS)  # the SDK has no argument for it
        try:
            api.create_container(
                SANDBOX_IMAGE,
                # The container's init only waits (one process, so `kill -1` spares it), then ends it.
                command=["python3", "-c", "import sys, time; time.sleep(float(sys.argv[1]))", lifetime],
                name=self.name,
                user=USER,
                working_dir=WORKSPACE,
                hostname="sandbox",
                labels={LABEL: "1", LABEL_LEASE: str(self.lease_id), LABEL_SCOPE: self.scope},
                network_disabled=network is None,
                host_config=host_config,
            )
            if self.inputs:
                copy_in(api, self.name, self.inputs)
        except ImageNotFound:
            raise EngineFailed(f"The engine has no {SANDBOX_IMAGE} image. {BUILD_IMAGE}") from None
        except (DockerException, RequestException) as error:
            logger.warning("creating shell container %s failed: %s", self.name, str(error)[:300])
            raise EngineFailed("The Docker engine could not create the sandbox container.") from None

    def run(self) -> None:
        """Start the created container and collect its output until it ends, is killed or stopped."""
        from docker.errors import DockerException  # the Docker SDK loads on first use
        from requests.exceptions import RequestException  # as does requests, under it

        api = engine_client().api
        try:
            api.start(self.name)
            command = ["bash", "-c", RUNNER, "bash", self.command]
            self.exec_id = api.exec_create(self.name, command, user=USER, workdir=WORKSPACE)["Id"]
            attached = exec_attach(api, self.exec_id)
        except (DockerException, RequestException) as error:
            logger.warning("starting shell container %s failed: %s", self.name, str(error)[:300])
            raise EngineFailed("The Docker engine could not start the sandbox container.") from None
        self.started_at = time.monotonic()
        try:
            self._collect(attached)
        finally:
            ended_at = time.monotonic()
            attached.close()
        self.exit_code = self._exit_code()
        if self.exit_code is None and not (self.stopped or self.timed_out):
            self.stopped = True  # the container went away under us (removed from outside)
        if self.exit_code == KILLED and ended_at >= self.deadline:
            self.timed_out = True  # its own `timeout` ended it at the lifetime, just before the call did

    def _collect(self, attached: Attached) -> None:
        frames = Frames()
        self._keep(frames.feed(attached.early))
        killed_at: float | None = None
        raw = attached.sock
        raw.settimeout(POLL)
        while True:
            now = time.monotonic()
            if killed_at is None:
                if self.stop.is_set():
                    self.stopped = True
                elif now >= self.deadline:
                    self.timed_out = True
                if self.stopped or self.timed_out or self.truncated:
                    self._kill()
                    killed_at = now
            elif now - killed_at > DRAIN:
                break
            try:
                chunk = raw.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            self._keep(frames.feed(chunk))

    def _keep(self, frames: Iterable[tuple[int, bytes]]) -> None:
        """Keep the frames' output, up to `OUTPUT_CAP` bytes in all."""
        kept = {STDOUT: self.stdout, STDERR: self.stderr}
        for stream, whole in frames:
            room = OUTPUT_CAP - self.output_bytes
            payload = whole[:room]
            if len(whole) > room:
                self.truncated = True
            if payload and stream in kept:
                kept[stream] += payload
                self.combined += payload
                self.output_bytes += len(payload)

    def _kill(self) -> None:
        # A container that is not running any more (it ended, or was removed) is what killing wanted.
        from docker.errors import APIError  # the Docker SDK loads on first use
        from requests.exceptions import RequestException  # as does requests, under it

        with contextlib.suppress(APIError, RequestException):
            engine_client().api.kill(self.name, "KILL")

    def _exit_code(self) -> int | None:
        """The command's exit status once its exec ended; None when the container went away."""
        from docker.errors import DockerException  # the Docker SDK loads on first use
        from requests.exceptions import RequestException  # as does requests, under it

        give_up = time.monotonic() + DRAIN
        while True:
            try:
                state = engine_client().api.exec_inspect(self.exec_id)
            except (DockerException, RequestException):
                return None
            code = state.get("ExitCode")
            if not state.get("Running"):
                return int(code) if isinstance(code, int) else None
            if time.monotonic() >= give_up:
                return None
            time.sleep(POLL)


def container_remove(name: str) -> bool:
    """Remove a container (killing it first); True once the engine confirms it is gone."""
    from docker.errors import APIError, DockerException, NotFound  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    try:
        engine_client().api.remove_container(name, force=True, v=True)  # its attachments volume too
    except NotFound:
        return True
    except APIError as error:
        if error.status_code == 409 and "already in progress" in str(error):
            return _gone(name)
        logger.warning("removing shell container %s failed: %s", name, str(error)[:300])
        return False
    except (DockerException, RequestException) as error:
        logger.warning("removing shell container %s failed: %s", name, str(error)[:300])
        return False
    return True


def _gone(name: str) -> bool:
    from docker.errors import DockerException, NotFound  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    give_up = time.monotonic() + REMOVE_TIMEOUT
    while time.monotonic() < give_up:
        try:
            engine_client().api.inspect_container(name)
        except NotFound:
            return True
        except (DockerException, RequestException):
            return False
        time.sleep(0.1)
    return False


def containers_of_scope(scope: str) -> list[tuple[str, str]]:
    """(name, lease id) of every shell container of this scope on the engine, running or not."""
    found = engine_client().api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{LABEL_SCOPE}={scope}"]})
    named = []
    for container in found:
        names = container.get("Names") or []
        lease = (container.get("Labels") or {}).get(LABEL_LEASE, "")
        if names:
            named.append((names[0].lstrip("/"), lease))
    return named
