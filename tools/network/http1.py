"""Just enough HTTP/1.1 for the browser proxy to pass one plain-http exchange and nothing else.

The proxy serves one request per client connection (`tools.network.proxy`), and this
module keeps that true on the wire:

- The request head is parsed strictly (a token method, one target, HTTP/1.0 or 1.1,
  `name: value` fields without control characters or folding) and the head sent upstream
  is rebuilt from what was parsed: origin form, no hop-by-hop field (`HOP_FIELDS` and
  whatever `Connection` names), and `Connection: close`. The credential is one of them.
- The request body is exactly its `Content-Length`; a `Transfer-Encoding` is refused
  (Chromium sends no chunked upload over HTTP/1.1). So nothing of the client connection
  past the first request is ever parsed or passed on: a pipelined request reaches nothing.
- Exactly one response is relayed (after any interim ones), each head with its hop-by-hop
  fields replaced by `Connection: close`, and its body by its own framing: whatever the
  upstream says about keeping its connection (`keep-alive`, HTTP/1.0), the proxy closes
  both connections once the answer is complete. Response heads are read as leniently as a
  browser reads them: nothing in them decides what goes upstream.

Anything malformed raises `MessageInvalid`; the proxy answers 400 for a request, 502 for
a response.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass

HEAD_MAX = 64 * 1024
CHUNK = 64 * 1024
IDLE_TIMEOUT = 120.0  # a tunnel or response silent this long is closed

# Fields that describe one connection, never forwarded in either direction.
HOP_FIELDS = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"upgrade",  # Chromium tunnels WebSockets with CONNECT: a plain request never upgrades
    }
)
# Fields that frame or route the message: a `Connection` option naming one is ignored.
_FRAMING_FIELDS = frozenset({b"content-length", b"host", b"transfer-encoding"})

_TOKEN = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_REQUEST_LINE = re.compile(rb"(" + _TOKEN + rb") ([\x21-\x7e]+) (HTTP/1\.[01])")
_FIELD_LINE = re.compile(rb"(" + _TOKEN + rb"):[ \t]*([\t\x20-\x7e\x80-\xff]*?)[ \t]*")
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([1-5][0-9][0-9])(?:[ \t].*)?")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,15})[ \t]*(?:;.*)?\r?\n")
_DIGITS = re.compile(rb"[0-9]{1,15}")


class MessageInvalid(Exception):
    """A message head or body the proxy will not pass on."""


@dataclass(frozen=True)
class RequestHead:
    method: str
    target: str
    version: str
    fields: tuple[tuple[bytes, bytes], ...]  # (name as sent, value)

    def values(self, name: bytes) -> list[bytes]:
        """The values of every field of this name (given in lower case)."""
        return [value for field, value in self.fields if field.lower() == name]


async def head_lines(reader: asyncio.StreamReader) -> list[bytes]:
    """Read a message head up to its empty line, lines ending in CRLF or a bare LF."""
    lines: list[bytes] = []
    size = 0
    while True:
        line = await reader.readuntil(b"\n")
        size += len(line)
        if size > HEAD_MAX:
            raise MessageInvalid("head too large")
        line = line.removesuffix(b"\n").removesuffix(b"\r")
        if not line:
            return lines
        lines.append(line)


def request_parse(lines: list[bytes]) -> RequestHead:
    """Parse a request head, refusing anything a reader could take apart differently."""
    start = _REQUEST_LINE.fullmatch(lines[0]) if lines else None
    if start is None:
        raise MessageInvalid("request line")
    fields = []
    for line in lines[1:]:
        found = _FIELD_LINE.fullmatch(line)
        if found is None:  # folded, nameless or with a control character
            raise MessageInvalid("field line")
        fields.append((found[1], found[2]))
    method, target, version = (part.decode("latin-1") for part in start.groups())
    return RequestHead(method=method, target=target, version=version, fields=tuple(fields))


def request_body_length(request: RequestHead) -> int:
    """The length of the request's body: its one Content-Length, or none."""
    if request.values(b"transfer-encoding"):
        raise MessageInvalid("transfer-encoding")
    lengths = set(request.values(b"content-length"))
    if not lengths:
        return 0
    length = lengths.pop()
    if lengths or not _DIGITS.fullmatch(length):
        raise MessageInvalid("content-length")
    return int(length)


def request_head_forwarded(request: RequestHead, path: str) -> bytes:
    """The head sent upstream: origin form, no hop-by-hop field, `Connection: close`."""
    dropped = _hop_names(request.fields)
    lines = [f"{request.method} {path} {request.version}".encode("latin-1")]
    lines += [name + b": " + value for name, value in request.fields if name.lower() not in dropped]
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def response_relay(source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, bodiless: bool) -> None:
    """Relay one response (after any interim ones) and its body; `bodiless` for a HEAD request."""
    while True:
        async with asyncio.timeout(IDLE_TIMEOUT):
            lines = await head_lines(source)
        status, fields, head = _response_head(lines)
        sink.write(head)
        await sink.drain()
        if status >= 200:
            break
    if bodiless or status in (204, 304):
        return
    await _body_relay(source, sink, fields)


def _response_head(lines: list[bytes]) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The status, the fields and the head to send on (hop-by-hop fields replaced)."""
    start = _STATUS_LINE.fullmatch(lines[0]) if lines else None
    if start is None or start[1] == b"101":  # no upgrade was asked for: Upgrade is not forwarded
        raise MessageInvalid("status line")
    grouped: list[tuple[bytes, bytes, list[bytes]]] = []  # name, value, its lines (folded ones too)
    for line in lines[1:]:
        if line[:1] in (b" ", b"\t"):  # obsolete folding: the field above goes on
            if grouped:
                name, value, kept = grouped[-1]
                grouped[-1] = (name, value + b" " + line.strip(), [*kept, line])
        elif b":" in line:
            name, _, value = line.partition(b":")
            grouped.append((name.strip().lower(), value.strip(), [line]))
    fields = [(name, value) for name, value, _ in grouped]
    dropped = _hop_names(fields)
    kept_lines = [line for name, _, group in grouped if name not in dropped for line in group]
    head = b"\r\n".join([lines[0], *kept_lines, b"Connection: close"]) + b"\r\n\r\n"
    return int(start[1]), fields, head


def _hop_names(fields: Iterable[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """The names of the fields not to forward: the hop-by-hop ones and those `Connection` names."""
    named = {
        option.strip().lower()
        for name, value in fields
        if name.lower() == b"connection"
        for option in value.split(b",")
    }
    return HOP_FIELDS | (named - _FRAMING_FIELDS)


async def _body_relay(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, fields: list[tuple[bytes, bytes]]
) -> None:
    """Relay a response body by its framing: chunked, a length, or until the upstream closes."""
    codings = b",".join(value for name, value in fields if name == b"transfer-encoding")
    lengths = {value for name, value in fields if name == b"content-length"}
    if codings and codings.rsplit(b",", 1)[-1].strip().lower() == b"chunked":
        await _chunked_relay(source, sink)
    elif not codings and len(lengths) == 1 and _DIGITS.fullmatch(length := lengths.pop()):
        await copy_exact(source, sink, int(length))
    else:
        await copy_until_eof(source, sink)


async def _chunked_relay(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Relay a chunked body as it is, up to its last chunk and trailer fields.

    A malformed chunk ends the relay: the connection closes on a body the browser sees cut.
    """
    while True:
        line = await _line(source)
        found = _CHUNK_SIZE.fullmatch(line)
        if found is None:
            return
        sink.write(line)
        size = int(found[1], 16)
        if not size:
            break
        await copy_exact(source, sink, size)
        end = await _line(source)
        if end not in (b"\r\n", b"\n"):
            return
        sink.write(end)
    while (line := await _line(source)) not in (b"\r\n", b"\n"):
        sink.write(line)
    sink.write(line)
    await sink.drain()


async def _line(source: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(IDLE_TIMEOUT):
        return await source.readuntil(b"\n")


async def copy_exact(source: asyncio.StreamReader, sink: asyncio.StreamWriter, count: int) -> None:
    """Copy `count` bytes (fewer if the source closes first), never one more."""
    while count > 0:
        async with asyncio.timeout(IDLE_TIMEOUT):
            data = await source.read(min(count, CHUNK))
        if not data:
            return
        sink.write(data)
        await sink.drain()
        count -= len(data)


async def copy_until_eof(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until the source closes or stays silent for IDLE_TIMEOUT."""
    while True:
        async with asyncio.timeout(IDLE_TIMEOUT):
            data = await source.read(CHUNK)
        if not data:
            return
        sink.write(data)
        await sink.drain()
