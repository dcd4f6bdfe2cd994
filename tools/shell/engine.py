"""The Docker engine the shell tool runs its sandboxes on, and what the owner sees of it.

One `docker` SDK client per process, for the engine at `DOCKER_HOST` (or the local
socket), made lazily and kept: creating it does not connect, so a missing engine costs
nothing until the first call. `engine_problem` is the tool's availability check and the
probes' source: None when the engine answers and the sandbox image is there, else a safe
message with what the operator must do.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from flarebot.core.hints import BUILD_SANDBOX_IMAGE_COMMAND
from flarebot.core.probes import ProbeResult

if TYPE_CHECKING:
    import docker

logger = logging.getLogger(__name__)

SANDBOX_REPOSITORY = "flarebot-sandbox"
# Bumped whenever what the image holds changes; `build_sandbox_image` builds this tag.
SANDBOX_VERSION = "1"
SANDBOX_IMAGE = f"{SANDBOX_REPOSITORY}:{SANDBOX_VERSION}"
# The image's unprivileged user, and its home and working directory (a tmpfs in each container).
SANDBOX_UID = 1000
WORKSPACE = "/workspace"
# Every container the shell creates carries these labels (`tools.shell.leases` reconciles by them).
LABEL = "flarebot.sandbox"
LABEL_LEASE = "flarebot.lease"
LABEL_SCOPE = "flarebot.scope"

API_TIMEOUT = 10.0  # seconds for one engine request (attach streams are read without it)
CHECK_TIMEOUT = 3.0  # the availability check must answer "at once"
CHECK_CACHE = 5.0  # seconds an answer of the check is reused by this process

START_ENGINE = (
    "Start a Docker engine for the shell (as root: `dockerd --bridge=none --iptables=false "
    "--ip6tables=false`, or `systemctl start docker`), or point DOCKER_HOST at one; then restart the worker."
)
BUILD_IMAGE = f"Build the sandbox image: `{BUILD_SANDBOX_IMAGE_COMMAND}` (makes {SANDBOX_IMAGE})."

_client: docker.DockerClient | None = None
_client_lock = threading.Lock()
_checked: tuple[float, str | None] | None = None


def engine_where() -> str:
    """Where the engine is expected, for messages (without any user part of DOCKER_HOST)."""
    host = os.environ.get("DOCKER_HOST")
    if not host:
        return "the local socket /var/run/docker.sock"
    scheme, separator, rest = host.partition("://")
    return f"{scheme}{separator}{rest.rpartition('@')[2]}" if separator else host.rpartition("@")[2]


def engine_client() -> docker.DockerClient:
    """Return this process's client of the engine (it connects on first use)."""
    import docker  # the Docker SDK loads on first use

    global _client
    with _client_lock:
        if _client is None:
            _client = docker.DockerClient.from_env(timeout=int(API_TIMEOUT), max_pool_size=16)
        return _client


def engine_problem(*, fresh: bool = False) -> str | None:
    """Return None when shell sandboxes can run here, else what the operator must do (cached briefly)."""
    global _checked
    now = time.monotonic()
    if not fresh and _checked is not None and now - _checked[0] < CHECK_CACHE:
        return _checked[1]
    problem = _problem()
    _checked = (now, problem)
    return problem


def _problem() -> str | None:
    import docker  # the Docker SDK loads on first use
    from docker.errors import DockerException, ImageNotFound  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    try:
        # Making the client asks the engine for its API version: no answer fails here.
        client = docker.DockerClient.from_env(timeout=int(CHECK_TIMEOUT))
        client.ping()
    except (DockerException, RequestException):
        return f"The shell is unavailable: no Docker engine answers at {engine_where()}. {START_ENGINE}"
    try:
        client.images.get(SANDBOX_IMAGE)
    except ImageNotFound:
        return f"The shell is unavailable: the engine has no {SANDBOX_IMAGE} image. {BUILD_IMAGE}"
    except (DockerException, RequestException):
        return f"The shell is unavailable: the engine at {engine_where()} did not answer. {START_ENGINE}"
    finally:
        client.close()
    return None


def docker_probe() -> ProbeResult:
    """The System section's "Docker engine" row."""
    import docker  # the Docker SDK loads on first use
    from docker.errors import DockerException  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    try:
        client = docker.DockerClient.from_env(timeout=int(CHECK_TIMEOUT))
        version = client.version()
        client.close()
    except (DockerException, RequestException):
        return ProbeResult(state="missing", detail=f"No Docker engine answers at {engine_where()}.", fix=START_ENGINE)
    return ProbeResult(state="ok", detail=f"Docker {version.get('Version', '?')} at {engine_where()}", fix=None)


def sandbox_image_probe() -> ProbeResult:
    """The System section's "Sandbox image" row."""
    import docker  # the Docker SDK loads on first use
    from docker.errors import DockerException, ImageNotFound  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    try:
        client = docker.DockerClient.from_env(timeout=int(CHECK_TIMEOUT))
        try:
            image = client.images.get(SANDBOX_IMAGE)
        finally:
            client.close()
    except ImageNotFound:
        return ProbeResult(state="missing", detail=f"The engine has no {SANDBOX_IMAGE} image.", fix=BUILD_IMAGE)
    except (DockerException, RequestException):
        return ProbeResult(
            state="missing", detail="No Docker engine answers, so the image cannot be checked.", fix=START_ENGINE
        )
    size = int(image.attrs.get("Size") or 0) // (1024 * 1024)
    return ProbeResult(state="ok", detail=f"{SANDBOX_IMAGE} ({size} MiB)", fix=None)
