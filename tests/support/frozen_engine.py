"""A Docker engine that stops answering, for this process only: a unix socket in front of the real one.

Until frozen it passes every byte both ways. Frozen, it holds what arrives on every
connection, so each request goes unanswered, as if the engine were paused; thawed, it passes
what it held, as a paused engine would take it up again. Unlike pausing the machine's
dockerd, nothing else that uses the engine at the same time (another test session, another
lane of `make test`) notices.
"""

from __future__ import annotations

import contextlib
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

ENGINE_SOCKET = "/var/run/docker.sock"
CHUNK = 65536


class FrozenEngine:
    def __init__(self, target: str = ENGINE_SOCKET) -> None:
        self.target = target
        self.path = Path(tempfile.mkdtemp(prefix="frozen-engine-")) / "docker.sock"
        self.thawed = threading.Event()
        self.thawed.set()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(64)
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, name="frozen-engine", daemon=True).start()

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def freeze(self) -> None:
        self.thawed.clear()

    def thaw(self) -> None:
        self.thawed.set()

    def close(self) -> None:
        self.thaw()
        for sock in [self._server, *self._open]:
            with contextlib.suppress(OSError):
                sock.close()
        self.path.unlink(missing_ok=True)
        self.path.parent.rmdir()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(self.target)
            except OSError:
                client.close()
                continue
            self._open += [client, upstream]
            threading.Thread(target=self._pass, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pass, args=(upstream, client), daemon=True).start()

    def _pass(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(CHUNK):
                self.thawed.wait()  # frozen: held, unanswered, until thawed
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def frozen_engine() -> Iterator[FrozenEngine]:
    engine = FrozenEngine()
    try:
        yield engine
    finally:
        engine.close()
