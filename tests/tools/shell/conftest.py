"""Fixtures of the shell tool tests, which run against the real Docker engine and sandbox image.

Nothing is skipped without Docker: `make test` (scripts/ensure-docker.sh) installs and
starts an engine and builds the image first, and a missing engine fails these tests.
Containers run with network `none`: nothing a test runs can leave the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import docker
import pytest

from tests.support.tool_context import tool_context
from tools.registry import ToolContext
from tools.runtime import Availability, CallResult, CallWatch, tool_call_execute
from tools.shell.engine import LABEL, LABEL_SCOPE, SANDBOX_IMAGE, engine_problem
from tools.shell.sandbox import sandbox_scope
from tools.shell.tool import SHELL

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    problem = engine_problem(fresh=True)
    if problem is not None:
        raise RuntimeError(f"the shell tests need Docker and {SANDBOX_IMAGE}: {problem}")
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(autouse=True)
def engine(docker_client: docker.DockerClient, db: None) -> Iterator[docker.DockerClient]:
    """The engine; after each test, no container of this run may be left."""
    yield docker_client
    left = our_containers(docker_client)
    for container in left:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
    assert not left, f"containers left behind: {[c.name for c in left]}"


def our_containers(client: docker.DockerClient) -> list[Any]:
    filters = {"label": [f"{LABEL}=1", f"{LABEL_SCOPE}={sandbox_scope()}"]}
    return list(client.containers.list(all=True, filters=filters, ignore_removed=True))


async def call(data: Any, context: ToolContext | None = None) -> CallResult:
    """Run one shell call through the tool runtime, as the engine does."""

    async def running() -> None:
        return None

    return await tool_call_execute(
        SHELL, context or tool_context(), data, availability=Availability(), watch=CallWatch(), on_running=running
    )


async def wait_until(check, what: str, timeout: float = 20.0) -> Any:
    loop = asyncio.get_running_loop()
    give_up = loop.time() + timeout
    while loop.time() < give_up:
        found = check()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
