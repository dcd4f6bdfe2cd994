"""Private resources for one test run: an id, a free port, a Redis database of its own."""

from __future__ import annotations

import os
import random
import secrets
import socket
from pathlib import Path

import redis

CLAIM_KEY = "flarebot:test-run-claim"
CLAIM_SECONDS = 3 * 3600


def new_run_id() -> str:
    return secrets.token_hex(4)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Ports chosen by listen_port() are at least this and below the kernel's ephemeral range.
LISTEN_PORTS_FROM = 10_000


def listen_port() -> int:
    """A free port for a server this run starts later (the live stack, the loopback fixtures).

    A port from `free_port()` lies in the kernel's ephemeral range: by the time the server
    binds it, a client socket (a connection to PostgreSQL or Redis) may have been given it
    as its own local port, and daphne failed with "Address already in use" in CI. Below
    that range a port is only ever taken by an explicit bind.
    """
    low = ephemeral_ports()[0]
    if low <= LISTEN_PORTS_FROM:
        return free_port()
    pick = random.SystemRandom()
    for _ in range(200):
        port = pick.randrange(LISTEN_PORTS_FROM, low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port between {LISTEN_PORTS_FROM} and {low}")


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of ports for port-0 binds and outgoing connections (Linux's default if unknown)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def claim_redis_db(base_url: str, run_id: str) -> str:
    """Claim an unused Redis database number (1-15) for this run, flush it, return its URL.

    Every run claims with SET NX, so two runs on one machine never share a database. The
    claim names the run, its host and the process that made it: a process of a run that
    claimed already (a command started with the run's id) gets the run's own database back,
    and a claim whose process on this host is gone (a run that was killed) is taken over at
    once instead of waiting for it to expire.
    """
    base_url = base_url.rstrip("/")
    clients = [redis.Redis.from_url(f"{base_url}/{db}") for db in range(1, 16)]
    for db, client in enumerate(clients, start=1):
        if _run_of(client.get(CLAIM_KEY)) == run_id:
            return f"{base_url}/{db}"
    claim = f"{run_id} {socket.gethostname()} {os.getpid()}"
    for db, client in enumerate(clients, start=1):
        held = client.get(CLAIM_KEY)
        if held is not None and _abandoned(held):
            client.eval(_DELETE_IF_SAME, 1, CLAIM_KEY, held)
        if client.set(CLAIM_KEY, claim, nx=True, ex=CLAIM_SECONDS):
            for key in client.scan_iter(count=1000):
                if key != CLAIM_KEY.encode():
                    client.delete(key)
            return f"{base_url}/{db}"
    raise RuntimeError("no free Redis database for this test run (all 15 are claimed)")


# Delete the claim only if it is still the abandoned one read (another run may have taken it).
_DELETE_IF_SAME = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def _text(held: bytes | str) -> str:
    return held.decode(errors="replace") if isinstance(held, bytes) else held


def _run_of(held: bytes | str | None) -> str | None:
    return _text(held).split(" ")[0] if held is not None else None


def _abandoned(held: bytes | str) -> bool:
    """Whether a claim's process was on this host and is gone (a claim that names none waits to expire)."""
    parts = _text(held).split(" ")
    if len(parts) != 3 or not parts[2].isdigit():
        return False
    host, pid = parts[1], int(parts[2])
    if host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def release_redis_db(url: str, run_id: str) -> None:
    """Empty the run's Redis database and give up the claim."""
    client = redis.Redis.from_url(url)
    if _run_of(client.get(CLAIM_KEY)) == run_id:
        client.flushdb()
