"""Loopback receivers that speak what Apprise sends: a JSON webhook, an ntfy server, an SMTP server.

Each records what it received, in order; the HTTP ones answer with the status a test sets
(500 to refuse). They listen on 127.0.0.1 only, on a free port.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from tests.support.resources import free_port


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HttpReceiver:
    """A JSON webhook (`json://`) or an ntfy server (`ntfy://`): both are a POST of a JSON body."""

    port: int
    status: int = 200
    delay: float = 0.0  # seconds before it answers
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def payloads(self) -> list[Any]:
        with self.lock:
            return [item.json() for item in self.received]

    def raw(self) -> bytes:
        with self.lock:
            return b"\n".join(item.body + json.dumps(item.headers).encode() for item in self.received)


@contextmanager
def http_receiver() -> Iterator[HttpReceiver]:
    receiver = HttpReceiver(port=free_port())

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            with receiver.lock:
                receiver.received.append(Received(self.path, dict(self.headers), body))
                status, delay = receiver.status, receiver.delay
            time.sleep(delay)
            payload = b'{"id":"x"}' if status < 300 else b"refused"
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", receiver.port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class SmtpReceiver:
    """An SMTP server that takes a plain-text sign-in (loopback only) and records each message."""

    port: int
    logins: list[tuple[str, str]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)


class _Handler:
    def __init__(self, receiver: SmtpReceiver) -> None:
        self.receiver = receiver

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.receiver.raw.append(envelope.content)
        self.receiver.messages.append(message_from_bytes(envelope.content))
        return "250 Message accepted for delivery"


@contextmanager
def smtp_receiver() -> Iterator[SmtpReceiver]:
    receiver = SmtpReceiver(port=free_port())

    def authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        if isinstance(data, LoginPassword):
            receiver.logins.append((data.login.decode(), data.password.decode()))
            return AuthResult(success=True)
        return AuthResult(success=False, handled=False)

    controller = Controller(
        _Handler(receiver),
        hostname="127.0.0.1",
        port=receiver.port,
        authenticator=authenticate,
        auth_require_tls=False,
    )
    controller.start()
    try:
        yield receiver
    finally:
        controller.stop()
