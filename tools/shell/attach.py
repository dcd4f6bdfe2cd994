"""An exec's output stream, read from the engine without losing its first bytes.

`exec_attach` starts an exec attached and hands back the socket its output comes on,
with whatever of that output already arrived. The SDK's own `exec_start(socket=True)`
returns the socket beneath the HTTP response and drops what the response's buffered
reader read past the headers (docker/docker-py#425): when the command wrote before the
headers were read, which a busy machine makes likely, its first lines were lost.

`Frames` splits the engine's multiplexed stream (an 8-byte header: the stream, three
zero bytes, the payload's size, big-endian) into (stream, payload) pairs as bytes come.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

HEADER = struct.Struct(">BxxxL")
STDOUT, STDERR = 1, 2  # the streams a frame's first byte names


@dataclass
class Attached:
    """A started exec's output: its socket, and the bytes that came in with the response's headers."""

    sock: socket.socket
    early: bytes
    _response: Any  # kept open with the socket (a TLS socket closes with it)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self._response.close()


def exec_attach(api: Any, exec_id: str) -> Attached:
    """Start the exec with its output attached; raises the SDK's errors as `exec_start` does."""
    # exec_start's own request, made here to keep its response (the SDK's private helpers).
    response = api._post_json(
        api._url("/exec/{0}/start", exec_id),
        headers={"Connection": "Upgrade", "Upgrade": "tcp"},
        data={"Tty": False, "Detach": False},
        stream=True,
    )
    attached = api._get_raw_response_socket(response)  # raises for an error status
    # A unix or plain TCP engine gives a SocketIO over the socket; a TLS one the socket itself.
    sock: socket.socket = getattr(attached, "_sock", attached)
    return Attached(sock=sock, early=_read_ahead(response, sock), _response=response)


def _read_ahead(response: Any, sock: socket.socket) -> bytes:
    """What the response's reader holds past the headers, without waiting for more."""
    reader = response.raw._fp.fp  # the buffered reader http.client read the headers with
    sock.setblocking(False)
    try:
        # What the reader buffered; when it holds nothing, one read that does not block.
        return bytes(reader.peek())
    except OSError:  # a TLS socket with nothing to read says so by raising
        return b""


class Frames:
    """The multiplexed stream's frames, from the bytes fed in as they arrive."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> Iterator[tuple[int, bytes]]:
        """Add what arrived; yield every frame now complete."""
        self._buffer += chunk
        while len(self._buffer) >= HEADER.size:
            stream, size = HEADER.unpack_from(self._buffer)
            end = HEADER.size + size
            if len(self._buffer) < end:
                return
            payload = bytes(self._buffer[HEADER.size : end])
            del self._buffer[:end]
            yield stream, payload
