"""daphne's HTTP requests, answered before more of a body is read than its route takes.

What is refused is decided in `flarebot.core.request_bounds`; here it meets Twisted, which
calls `gotLength` once the headers are in (with the declared length, or None for a chunked
body) and `handleContentChunk` for each piece of the body; daphne's request hands the body
to the application only after the last piece. A refused request is answered at once and its
connection closed, as Twisted closes one it cannot parse; what the client sent on is never
read, so the process holds at most a bound's worth of any body.
"""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import unquote

from daphne.http_protocol import HTTPFactory, WebRequest

from flarebot.core.request_bounds import BodyGuard, Refusal, refusal_response


def _header(request: WebRequest, name: bytes, separator: str) -> str | None:
    values = request.requestHeaders.getRawHeaders(name)
    return separator.join(value.decode("latin-1") for value in values) if values else None


class BoundedRequest(WebRequest):
    """daphne's request, answered and closed before more of its body is read than it may have."""

    guard: BodyGuard | None = None
    refused = False
    body_received = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Twisted would parse a whole form body into `args` (multipart through the email
        # package, several copies of the body at once) before daphne ignores them: the
        # application reads the body itself.
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    def gotLength(self, length: int | None) -> None:
        # Twisted keeps the request line on the channel until the body is complete.
        self.target = self.channel._command.decode("latin-1"), self.channel._path.decode("latin-1")
        method, target = self.target
        self.guard = BodyGuard(
            path=unquote(target.partition("?")[0]),
            method=method,
            origin=_header(self, b"Origin", ","),
            cookie=_header(self, b"Cookie", ";") or "",
        )
        refusal = self.guard.refusal(length) if length is not None else None
        if refusal is not None:
            self.content = io.BytesIO()  # closed with the connection; nothing is written to it
            self._refuse(refusal)
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused or self.guard is None:
            return  # what came in the same read as the bytes that passed the bound
        self.body_received += len(data)
        refusal = self.guard.refusal(self.body_received)
        if refusal is not None:
            self._refuse(refusal)
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        # A refused chunked body can still end within the read that passed its bound.
        if not self.refused:
            super().requestReceived(command, path, version)

    def _refuse(self, refusal: Refusal) -> None:
        """Answer now and close the connection without reading the rest."""
        assert self.guard is not None
        self.refused = True
        # Twisted answers `Expect: 100-continue` once the length is known: this answer is the last.
        self.requestHeaders.removeHeader(b"Expect")
        response = refusal_response(refusal, path=self.guard.path)
        self.channel.transport.write(response)
        self.channel.loseConnection()
        method, target = self.target
        client = f"{self.client.host}:{self.client.port}" if hasattr(self.client, "port") else None
        details = {"path": target, "status": refusal.status, "method": method, "client": client}
        self.server.log_action("http", "complete", {**details, "time_taken": 0, "size": len(response)})


class BoundedHTTPFactory(HTTPFactory):
    """daphne's HTTP factory, whose requests are bounded."""

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = BoundedRequest
        return protocol
