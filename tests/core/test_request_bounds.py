"""Request bodies are bounded before the web process reads them (flarebot.web_bounds, flarebot.core.request_bounds).

A real daphne (`python -m flarebot.web`, alone) on loopback, spoken to over a raw socket:
each body is a generator sent piece by piece while the client watches for the answer, so
a test knows how much it had sent when the answer came, and nothing of 1.5 GB is ever made
whole. The web process's resident memory is read from /proc while a body streams.
"""

from __future__ import annotations

import json
import os
import select
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import pytest
from django.conf import settings

from attachments.limits import FILE_MAX, too_large_message
from attachments.uploads import UPLOAD_BODY_MAX
from flarebot.core.env import BASE_DIR
from flarebot.core.errors import TooLarge
from flarebot.core.models import Installation
from flarebot.core.stack import Stack, process_specs
from tests.support.live import LiveStack, database_url
from tests.support.live_clients import OwnerClient
from tests.support.resources import listen_port

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

JSON_BOUND = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
GIGABYTES_1_5 = 1_500_000_000
PIECE = 64 * 1024
# What the kernel may take on either side of a connection the server no longer reads
# (tcp_rmem's 32 MiB at most, tcp_wmem's 4 MiB), with room to spare.
SOCKET_SLACK = 64 * 1024 * 1024
# A client that sent this much past the bound without an answer stops: the bound did not act.
GIVE_UP_PAST = 2 * SOCKET_SLACK
ANSWER_SECONDS = 30.0  # with no progress either way; far above a loaded machine's worst case
RSS_GROWTH_MAX = 50 * 1024 * 1024
SESSION = settings.SESSION_COOKIE_NAME
BOUNDARY = "bounded-upload-boundary"


@pytest.fixture(scope="module")
def web(django_db_setup: None, django_db_blocker: object) -> Iterator[LiveStack]:
    """The web process alone, as `make run` starts it, on this run's database and Redis."""
    port = listen_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flarebot.settings",
        "DATABASE_URL": database_url(),
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    [spec, *_] = process_specs(bind="127.0.0.1", port=port, worker_name="unused", worker_threads=1)
    log_dir = Path(settings.FLAREBOT_DATA_DIR) / "logs" / "request-bounds"
    live = LiveStack(
        stack=Stack(specs=[spec], env=env, log_dir=log_dir, cwd=BASE_DIR),
        base_url=f"http://127.0.0.1:{port}",
        origin=settings.FLAREBOT_ORIGIN,
        log_dir=log_dir,
    )
    live.stack.start()
    try:
        live.wait_ready("web")
        yield live
    finally:
        live.stop()


@pytest.fixture
def signed_in(web: LiveStack, owner: Installation) -> OwnerClient:
    return OwnerClient.sign_in(web)


@pytest.fixture
def conversation_id(signed_in: OwnerClient) -> str:
    return signed_in.create_conversation("Bounds")


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int  # body bytes the client had sent when the answer was complete
    rss_growth: int  # the web process's most resident memory meanwhile, over what it held before
    seconds: float  # from the end of the head to the whole answer (shown with a failure, not asserted)
    connection: socket.socket = field(repr=False)

    @property
    def error(self) -> dict[str, str]:
        body = json.loads(self.body)
        assert set(body) == {"error"}, body
        assert set(body["error"]) == {"code", "message"}, body
        assert body["error"]["message"]
        return dict(body["error"])

    def connection_ends(self) -> bool:
        """Whether the server closes the connection (the rest of the body is never read)."""
        self.connection.setblocking(True)
        self.connection.settimeout(ANSWER_SECONDS)
        try:
            while self.connection.recv(PIECE):
                pass
        except ConnectionResetError:
            pass
        except TimeoutError:
            return False
        return True


OPEN: list[socket.socket] = []


@pytest.fixture(autouse=True)
def _connections_closed() -> Iterator[None]:
    yield
    while OPEN:
        OPEN.pop().close()


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def parse_answer(received: bytes | bytearray) -> tuple[int, dict[str, str], bytes] | None:
    """The first whole response in what was received, if there is one yet."""
    end = received.find(b"\r\n\r\n")
    if end == -1:
        return None
    status_line, *lines = bytes(received[:end]).decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    length = int(headers.get("content-length", "0"))
    body = bytes(received[end + 4 : end + 4 + length])
    if len(body) < length:
        return None
    return int(status_line.split()[1]), headers, body


def exchange(web: LiveStack, head: bytes, body: Iterable[bytes] = (), *, give_up_after: int | None = None) -> Answer:
    """Send the head, then the body piece by piece while watching for the answer; stop sending once it came."""
    pid = web.stack.processes["web"].pid
    before = most = rss(pid)
    connection = socket.create_connection(("127.0.0.1", int(web.base_url.rsplit(":", 1)[1])), timeout=ANSWER_SECONDS)
    OPEN.append(connection)
    connection.sendall(head)
    started = time.monotonic()
    connection.setblocking(False)
    pieces = iter(body)
    pending = memoryview(b"")
    sent = 0
    sending = True
    received = bytearray()
    progress = time.monotonic()
    while (answer := parse_answer(received)) is None:
        assert time.monotonic() - progress < ANSWER_SECONDS, f"no answer after {sent:,} bytes of the body"
        readable, writable, _ = select.select([connection], [connection] if sending else [], [], 0.05)
        most = max(most, rss(pid))
        if readable:
            try:
                data = connection.recv(PIECE)
            except ConnectionResetError:
                data = b""
            assert data, f"closed without an answer after {sent:,} bytes: {bytes(received)!r}"
            received += data
            progress = time.monotonic()
        if writable:
            if not pending:
                piece = next(pieces, None)
                if piece is None:
                    sending = False
                    continue
                pending = memoryview(piece)
            try:
                count = connection.send(pending)
            except (BrokenPipeError, ConnectionResetError):
                sending = False
                continue
            sent += count
            pending = pending[count:]
            progress = time.monotonic()
            if give_up_after is not None and sent > give_up_after:
                sending = False
    status, headers, answer_body = answer
    most = max(most, rss(pid))
    return Answer(status, headers, answer_body, sent, most - before, time.monotonic() - started, connection)


def request_head(
    path: str,
    *,
    length: int | None,
    content_type: str = "application/json",
    origin: str | None = settings.FLAREBOT_ORIGIN,
    cookies: Iterable[str] = (),
    extra: str = "",
) -> bytes:
    """A POST's head: `length` as its Content-Length, or None for a chunked body."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    if origin is not None:
        lines.append(f"Origin: {origin}")
    if cookies:
        lines.append("Cookie: " + "; ".join(f"{SESSION}={value}" for value in cookies))
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


def repeated(byte: bytes, count: int) -> Iterator[bytes]:
    """`count` bytes of `byte`, in pieces; nothing larger than a piece is made."""
    block = byte * PIECE
    whole, rest = divmod(count, PIECE)
    for _ in range(whole):
        yield block
    if rest:
        yield block[:rest]


def chunked(pieces: Iterable[bytes], *, last: bool) -> Iterator[bytes]:
    """The pieces in chunked transfer coding; `last` ends the body."""
    for piece in pieces:
        yield b"%x\r\n" % len(piece) + piece + b"\r\n"
    if last:
        yield b"0\r\n\r\n"


def json_body(size: int) -> Iterator[bytes]:
    """A conversation to create, padded with whitespace to exactly `size` bytes."""
    start = b'{"name": "Bounded"}'
    return chain([start], repeated(b" ", size - len(start)))


def upload_body(size: int) -> Iterator[bytes]:
    """One text file of FILE_MAX bytes in multipart, its preamble padded to exactly `size` bytes.

    Django reads a part's headers in 1,024 bytes, the preamble's too, so the padding is
    lines shorter than that.
    """
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="notes.txt"\r\n'
        "Content-Type: text/plain\r\n\r\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    padding = size - FILE_MAX - len(head) - len(tail)
    line = b" " * 508 + b"\r\n\r\n"
    lines, rest = divmod(padding, len(line))
    return chain([b" " * rest], (line for _ in range(lines)), [head], repeated(b"a", FILE_MAX), [tail])


UPLOAD_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


@dataclass(frozen=True)
class Route:
    name: str
    bound: int
    content_type: str
    url: str  # `{conversation}` where the route names one

    def path(self, conversation_id: str) -> str:
        return self.url.format(conversation=conversation_id)

    def body(self, size: int) -> Iterator[bytes]:
        return json_body(size) if self is JSON_ROUTE else upload_body(size)


JSON_ROUTE = Route("json", JSON_BOUND, "application/json", "/api/conversations/")
UPLOAD_ROUTE = Route("upload", UPLOAD_BODY_MAX, UPLOAD_TYPE, "/api/conversations/{conversation}/attachments/")
# A file attached in a new chat, uploaded to no conversation yet: the same bound.
UNSENT_UPLOAD_ROUTE = Route("unsent-upload", UPLOAD_BODY_MAX, UPLOAD_TYPE, "/api/attachments/")
ROUTES = [pytest.param(JSON_ROUTE, id="json"), pytest.param(UPLOAD_ROUTE, id="upload")]
EDGE_ROUTES = [*ROUTES, pytest.param(UNSENT_UPLOAD_ROUTE, id="unsent-upload")]
FRAMINGS = [pytest.param(False, id="content-length"), pytest.param(True, id="chunked")]


@pytest.mark.parametrize("is_chunked", FRAMINGS)
@pytest.mark.parametrize("route", ROUTES)
def test_it_refuses_a_streamed_1_5_gb_body_early_and_holds_none_of_it(
    web, signed_in, conversation_id, route, is_chunked
):
    head = request_head(
        route.path(conversation_id),
        length=None if is_chunked else GIGABYTES_1_5,
        content_type=route.content_type,
        cookies=[signed_in.session_key],
    )
    body = repeated(b"x", GIGABYTES_1_5)

    answer = exchange(
        web, head, chunked(body, last=True) if is_chunked else body, give_up_after=route.bound + GIVE_UP_PAST
    )

    assert answer.status == 413, answer
    assert answer.error["code"] == "too_large"
    # The answer came while the client was still sending: within the bound and what the
    # kernel buffers, a small fraction of the 1.5 GB.
    assert answer.sent <= route.bound + SOCKET_SLACK, f"{answer.sent:,} bytes sent before the answer"
    assert answer.rss_growth < RSS_GROWTH_MAX, f"the web process grew {answer.rss_growth:,} bytes"
    assert answer.connection_ends()
    assert signed_in.api("GET", "/api/conversations/").status_code == 200  # and it serves on


@pytest.mark.parametrize("is_chunked", FRAMINGS)
@pytest.mark.parametrize("route", EDGE_ROUTES)
def test_it_takes_a_body_of_exactly_the_bound(web, signed_in, conversation_id, route, is_chunked):
    head = request_head(
        route.path(conversation_id),
        length=None if is_chunked else route.bound,
        content_type=route.content_type,
        cookies=[signed_in.session_key],
    )
    body = route.body(route.bound)

    answer = exchange(web, head, chunked(body, last=True) if is_chunked else body)

    # The whole body reaches the application (daphne queues it), and only it.
    assert answer.rss_growth < RSS_GROWTH_MAX, f"the web process grew {answer.rss_growth:,} bytes"
    # The view answers once daphne has the whole body. DRF and Django read a body by its
    # declared length, so a chunked one reaches the view empty: a conversation with the
    # default name, an upload without its file.
    if not is_chunked:
        assert answer.status == 201, answer
        created = json.loads(answer.body)
        if route is JSON_ROUTE:
            assert created["name"] == "Bounded"
        else:
            assert created["size"] == FILE_MAX
    elif route is JSON_ROUTE:
        assert answer.status == 201, answer
    else:
        assert answer.status == 400, answer
        assert answer.error["code"] == "invalid_upload"


@pytest.mark.parametrize("is_chunked", FRAMINGS)
@pytest.mark.parametrize("route", EDGE_ROUTES)
def test_it_refuses_one_byte_more_than_the_bound(web, signed_in, conversation_id, route, is_chunked):
    size = route.bound + 1
    head = request_head(
        route.path(conversation_id),
        length=None if is_chunked else size,
        content_type=route.content_type,
        cookies=[signed_in.session_key],
    )
    # A declared length is refused on the headers: no byte of the body is sent. A chunked
    # body is refused on its byte past the bound, before it ends.
    body = chunked(route.body(size), last=False) if is_chunked else ()

    answer = exchange(web, head, body)

    assert answer.status == 413, answer
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["connection"] == "close"
    expected = TooLarge.default_message if route is JSON_ROUTE else too_large_message()
    assert answer.error == {"code": "too_large", "message": expected}
    assert answer.connection_ends()


@pytest.mark.parametrize(
    ("origin", "cookies", "status", "code"),
    [
        pytest.param("https://elsewhere.example", ["a-session"], 403, "origin_refused", id="foreign-origin"),
        pytest.param(None, ["a-session"], 403, "origin_refused", id="no-origin"),
        pytest.param(settings.FLAREBOT_ORIGIN, [], 401, "not_authenticated", id="no-session"),
        pytest.param(settings.FLAREBOT_ORIGIN, ["a-session", "another"], 401, "duplicate_cookie", id="two-sessions"),
    ],
)
@pytest.mark.parametrize("is_chunked", FRAMINGS)
@pytest.mark.parametrize("route", ROUTES)
def test_it_answers_the_checks_of_the_headers_once_a_body_passes_the_default(
    web, origin, cookies, status, code, route, is_chunked
):
    # One byte past the default: over the JSON route's bound, well within the upload's,
    # which is for the owner only.
    size = JSON_BOUND + 1
    head = request_head(
        route.path(str(uuid.uuid4())),
        length=None if is_chunked else size,
        content_type=route.content_type,
        origin=origin,
        cookies=cookies,
    )
    body = chunked(repeated(b"x", size), last=False) if is_chunked else ()

    answer = exchange(web, head, body)

    assert answer.status == status, answer
    assert answer.error["code"] == code
    assert answer.connection_ends()


def test_it_refuses_a_page_s_body_in_plain_text(web):
    answer = exchange(
        web, request_head("/login/", length=JSON_BOUND + 1, content_type="application/x-www-form-urlencoded")
    )

    assert answer.status == 413, answer
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"
    assert answer.body == TooLarge.default_message.encode()
    assert answer.connection_ends()


def test_it_does_not_ask_for_a_refused_body_with_100_continue(web, signed_in):
    head = request_head(
        "/api/conversations/", length=GIGABYTES_1_5, cookies=[signed_in.session_key], extra="Expect: 100-continue\r\n"
    )

    answer = exchange(web, head)

    assert answer.status == 413, answer  # the first answer: no 100 Continue before it
    assert answer.connection_ends()
