"""A guard that keeps a test process on the machine: no connection or lookup beyond loopback.

Installed once as an audit hook (`sys.addaudithook`, which cannot be removed) and armed
while the web tests run. Armed, it refuses every `connect`, `sendto` and `getaddrinfo`
of this process that names anything but a loopback address or `localhost`, and records
it, so a test whose code under test tried to leave the machine fails even if that code
swallowed the error. Unix sockets pass.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from typing import Any

_installed = False
_armed = False
_lock = threading.Lock()
violations: list[str] = []


class OffMachine(ConnectionRefusedError):
    """A connection or lookup that would leave the machine (refused by the test guard)."""


def _loopback(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(what: str) -> None:
    with _lock:
        violations.append(what)
    raise OffMachine(f"test socket guard: {what} would leave the machine")


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _armed:
        return
    if event in ("socket.connect", "socket.sendto"):
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            _refuse(f"{event} to {address[0]!r}")
    elif event == "socket.getaddrinfo":
        host = args[0]
        if host is not None and not _loopback(host):
            _refuse(f"getaddrinfo of {host!r}")


def arm() -> None:
    """Install the guard (once per process) and start refusing."""
    global _installed, _armed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True
    _armed = True


def disarm() -> None:
    global _armed
    _armed = False


def take_violations() -> list[str]:
    with _lock:
        taken = list(violations)
        violations.clear()
    return taken
