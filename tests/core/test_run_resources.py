"""A test run's private Redis database: claimed once per run, taken over when its run was killed.

Against a Redis server of its own (on a free loopback port), so the claims of runs going on
at the same time on the machine's Redis are never touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
import redis

from tests.support.resources import (
    CLAIM_KEY,
    LISTEN_PORTS_FROM,
    claim_redis_db,
    ephemeral_ports,
    free_port,
    listen_port,
    release_redis_db,
)


@pytest.fixture
def server(tmp_path) -> Iterator[str]:
    binary = shutil.which("redis-server")
    assert binary is not None, "redis-server is installed with the Redis the suite needs"
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, "the test's Redis did not start"
            time.sleep(0.05)
    yield url
    process.terminate()
    process.wait(10)


def a_dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def claims(url: str) -> dict[int, str]:
    held = {db: redis.Redis.from_url(f"{url}/{db}", decode_responses=True).get(CLAIM_KEY) for db in range(1, 16)}
    return {db: str(value or "") for db, value in held.items()}


def test_a_run_gets_its_own_database_back_and_another_run_gets_another(server):
    first = claim_redis_db(server, "run-a")

    assert claim_redis_db(server, "run-a") == first
    assert claim_redis_db(server, "run-b") != first


def test_the_claim_of_a_killed_run_is_taken_over_and_a_live_ones_is_kept(server):
    host = socket.gethostname()
    for db in range(1, 15):
        redis.Redis.from_url(f"{server}/{db}").set(CLAIM_KEY, f"live-{db} {host} {os.getpid()}")
    redis.Redis.from_url(f"{server}/15").set(CLAIM_KEY, f"killed {host} {a_dead_pid()}")

    url = claim_redis_db(server, "new-run")

    assert url.endswith("/15")
    assert claims(server)[15].startswith("new-run ")
    assert all(claims(server)[db].startswith("live-") for db in range(1, 15))


def test_a_claim_that_names_no_process_waits_to_expire(server):
    for db in range(1, 16):
        redis.Redis.from_url(f"{server}/{db}").set(CLAIM_KEY, f"old-run-{db}")

    with pytest.raises(RuntimeError, match="all 15 are claimed"):
        claim_redis_db(server, "new-run")


def test_release_empties_the_database_and_frees_the_claim(server):
    url = claim_redis_db(server, "run-a")
    redis.Redis.from_url(url).set("leftover", "1")

    release_redis_db(url, "run-a")

    assert redis.Redis.from_url(url).dbsize() == 0
    assert claim_redis_db(server, "run-b") == url


def test_a_port_for_a_later_server_is_free_and_never_one_the_kernel_gives_a_client() -> None:
    low, _ = ephemeral_ports()
    ports = {listen_port() for _ in range(20)}
    assert all(LISTEN_PORTS_FROM <= port < low for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: a server can listen on it
    # A client's own port comes from the ephemeral range: it can never be one of these.
    with socket.create_server(("127.0.0.1", 0)) as server, socket.create_connection(server.getsockname()) as client:
        assert client.getsockname()[1] >= low
