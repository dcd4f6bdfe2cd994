"""Clients of the live stack for tests: the owner signed in over real HTTP, and real sockets.

Cookies are Secure, so over plain HTTP they are read from Set-Cookie and sent back by
hand. A `LiveSocket` records every frame it receives with the moment it arrived, so tests
can check order, sequences and timing of what a user's browser would have seen.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any

import httpx
from django.conf import settings
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Origin

from tests.support.live import LiveStack
from tests.support.owner import OWNER_PASSWORD, OWNER_USERNAME

HTTP_TIMEOUT = 10.0
TURN_SECONDS = 30.0
TERMINAL_EVENTS = ("turn.completed", "turn.failed", "turn.cancelled")


def new_anthropic_key() -> str:
    """A key of Anthropic's shape, new each time (the loopback provider accepts any)."""
    return f"sk-ant-api03-{secrets.token_urlsafe(36)}"


def _set_cookies(response: httpx.Response) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for header in response.headers.get_list("set-cookie"):
        jar.load(header)
    return {name: morsel.value for name, morsel in jar.items()}


@dataclass(frozen=True)
class Received:
    at: float  # time.monotonic() when the frame arrived
    frame: dict[str, Any]


@dataclass(frozen=True)
class TurnResult:
    turn_id: str
    received: list[Received]

    @property
    def events(self) -> list[dict[str, Any]]:
        return event_frames(self.received)

    @property
    def terminal(self) -> dict[str, Any]:
        return self.events[-1]

    @property
    def text(self) -> str:
        return delta_text(self.received)


def event_frames(received: list[Received]) -> list[dict[str, Any]]:
    return [r.frame for r in received if r.frame["type"] == "event"]


def deltas(received: list[Received]) -> list[Received]:
    return [r for r in received if r.frame["type"] == "event" and r.frame["event"] == "text.delta"]


def delta_text(received: list[Received]) -> str:
    return "".join(r.frame["data"]["text"] for r in deltas(received))


def shown_text(events: list[dict[str, Any]]) -> str:
    """Return the answer text a client shows after these events: deltas append, replacements reset."""
    text = ""
    for event in events:
        if event["event"] == "text.delta":
            text += event["data"]["text"]
        elif event["event"] == "message.replaced":
            text = "".join(part["text"] for part in event["data"]["parts"] if part["type"] == "text")
    return text


def sequences(received: list[Received]) -> list[int]:
    return [frame["sequence"] for frame in event_frames(received)]


@dataclass
class LiveSocket:
    """A conversation socket through daphne's real handshake."""

    live: LiveStack
    connection: ClientConnection
    received: list[Received] = field(default_factory=list)

    def send(self, frame: dict[str, Any]) -> float:
        """Send a client frame; return when it was sent (monotonic)."""
        self.connection.send(json.dumps(frame))
        return time.monotonic()

    def send_message(self, text: str) -> str:
        """Send a user_message and return its request id."""
        request_id = str(uuid.uuid4())
        self.send({"type": "user_message", "request_id": request_id, "text": text})
        return request_id

    def cancel(self) -> float:
        return self.send({"type": "cancel_agent"})

    def read_until(
        self, done: Callable[[Received], bool], *, timeout: float = TURN_SECONDS, deadline: float | None = None
    ) -> list[Received]:
        """Read frames until one satisfies `done` (included); fail at the deadline."""
        deadline = deadline if deadline is not None else time.monotonic() + timeout
        read: list[Received] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(self._stuck("the awaited frame", read))
            try:
                raw = self.connection.recv(timeout=left)
            except TimeoutError:
                raise AssertionError(self._stuck("the awaited frame", read)) from None
            received = Received(time.monotonic(), json.loads(raw))
            read.append(received)
            self.received.append(received)
            if done(received):
                return read

    def read_until_event(self, kinds: tuple[str, ...], *, turn_id: str | None = None, **limits: Any) -> list[Received]:
        def done(received: Received) -> bool:
            frame = received.frame
            return (
                frame["type"] == "event"
                and frame["event"] in kinds
                and (turn_id is None or frame["turn_id"] == turn_id)
            )

        return self.read_until(done, **limits)

    def read_deltas(self, count: int, **limits: Any) -> list[Received]:
        """Read until `count` text deltas have arrived on this socket."""
        return self.read_until(lambda _: len(deltas(self.received)) >= count, **limits)

    def ask(self, text: str, *, timeout: float = TURN_SECONDS) -> TurnResult:
        """Send a message and read until its turn ends; the first frame must be its ack."""
        request_id = self.send_message(text)
        start = len(self.received)
        [ack] = self.read_until(lambda r: r.frame["type"] in ("ack", "error"), timeout=HTTP_TIMEOUT)
        assert ack.frame["type"] == "ack", ack.frame
        assert ack.frame["request_id"] == request_id, ack.frame
        turn_id = ack.frame["turn_id"]
        self.read_until_event(TERMINAL_EVENTS, turn_id=turn_id, timeout=timeout)
        return TurnResult(turn_id, self.received[start:])

    def _stuck(self, what: str, read: list[Received]) -> str:
        dead = self.live.stack.exited()
        tail = self.live.stack.log_text("worker")[-3000:]
        return (
            f"timed out waiting for {what}; read {[r.frame for r in read]}"
            + (f"; {dead} exited" if dead else "")
            + f"\nworker log tail:\n{tail}"
        )

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> LiveSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class OwnerClient:
    """The owner, signed in over real HTTP to the live stack."""

    live: LiveStack
    session_key: str

    @classmethod
    def sign_in(cls, live: LiveStack) -> OwnerClient:
        """Sign in the way a browser does: the page's CSRF cookie and token, then the form."""
        page = httpx.get(f"{live.base_url}/login/", timeout=HTTP_TIMEOUT)
        assert page.status_code == 200
        csrf_cookie = _set_cookies(page)[settings.CSRF_COOKIE_NAME]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token is not None
        response = httpx.post(
            f"{live.base_url}/login/",
            data={"csrfmiddlewaretoken": token.group(1), "username": OWNER_USERNAME, "password": OWNER_PASSWORD},
            headers={"Origin": live.origin, "Cookie": f"{settings.CSRF_COOKIE_NAME}={csrf_cookie}"},
            timeout=HTTP_TIMEOUT,
        )
        assert response.status_code == 302, response.text
        return cls(live, _set_cookies(response)[settings.SESSION_COOKIE_NAME])

    def api(self, method: str, path: str, *, json: object = None) -> httpx.Response:
        headers = {"Origin": self.live.origin, "Cookie": f"{settings.SESSION_COOKIE_NAME}={self.session_key}"}
        return httpx.request(method, f"{self.live.base_url}{path}", headers=headers, json=json, timeout=HTTP_TIMEOUT)

    def set_provider_key(self, provider: str, key: str) -> None:
        response = self.api("PUT", f"/api/settings/provider-keys/{provider}/", json={"key": key})
        assert response.status_code == 200, response.text
        assert response.json()["credentials"][provider] == "configured"

    def create_conversation(self, name: str = "Live turns") -> str:
        response = self.api("POST", "/api/conversations/", json={"name": name})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def messages(self, conversation_id: str) -> dict[str, Any]:
        response = self.api("GET", f"/api/conversations/{conversation_id}/messages/")
        assert response.status_code == 200, response.text
        return dict(response.json())

    def socket(self, conversation_id: str, *, last_sequence: int | None = None) -> LiveSocket:
        url = self.live.base_url.replace("http://", "ws://", 1) + f"/ws/conversations/{conversation_id}/"
        if last_sequence is not None:
            url += f"?last_sequence={last_sequence}"
        connection = connect(
            url,
            origin=Origin(self.live.origin),
            additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={self.session_key}"},
            proxy=None,
            open_timeout=HTTP_TIMEOUT,
            legacy=True,  # closed by LiveSocket.close() or its context manager
        )
        return LiveSocket(self.live, connection)


def message_text(message: dict[str, Any]) -> str:
    """Return the text parts of a contract `M`, joined."""
    return "".join(part["text"] for part in message["parts"] if part["type"] == "text")
