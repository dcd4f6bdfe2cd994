"""Private resources for one test run: an id, a free port, a Redis database of its own."""

from __future__ import annotations

import secrets
import socket

import redis

CLAIM_KEY = "flarebot:test-run-claim"
CLAIM_SECONDS = 3 * 3600


def new_run_id() -> str:
    return secrets.token_hex(4)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def claim_redis_db(base_url: str, run_id: str) -> str:
    """Claim an unused Redis database number (1-15) for this run, flush it, return its URL.

    Every run claims with SET NX, so two runs on one machine never share a database; a
    claim left by a crashed run expires. A process of a run that claimed already (a
    command started with the run's id) gets the run's own database back.
    """
    base_url = base_url.rstrip("/")
    clients = [redis.Redis.from_url(f"{base_url}/{db}") for db in range(1, 16)]
    for db, client in enumerate(clients, start=1):
        if client.get(CLAIM_KEY) == run_id.encode():
            return f"{base_url}/{db}"
    for db, client in enumerate(clients, start=1):
        if client.set(CLAIM_KEY, run_id, nx=True, ex=CLAIM_SECONDS):
            for key in client.scan_iter(count=1000):
                if key != CLAIM_KEY.encode():
                    client.delete(key)
            return f"{base_url}/{db}"
    raise RuntimeError("no free Redis database for this test run (all 15 are claimed)")


def release_redis_db(url: str, run_id: str) -> None:
    """Empty the run's Redis database and give up the claim."""
    client = redis.Redis.from_url(url)
    if client.get(CLAIM_KEY) == run_id.encode():
        client.flushdb()
