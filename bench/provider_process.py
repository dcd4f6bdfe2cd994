"""The loopback provider in a process of its own, as a remote provider would be.

In the benchmark's own process it would compete with the measuring clients for one
interpreter lock, and its delays would be counted as Flarebot's. Emission times use
CLOCK_MONOTONIC, which all processes of the machine share.
"""

from __future__ import annotations

import gc
import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

from tests.support.fake_providers import FakeProviders, Step


def _serve(port: int, commands: Connection) -> None:
    emitted: dict[str, float] = {}
    providers = FakeProviders(port=port)
    providers.on_emit = lambda text, at: emitted.__setitem__(text, at)
    providers.start()
    # A remote provider's pauses are not Flarebot's: keep this stand-in's garbage
    # collector from stalling its streams (it holds every script and emission time).
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    commands.send("ready")
    while True:
        command, argument = commands.recv()
        if command == "script":
            providers.reset()
            emitted.clear()
            providers.script(*argument)
            commands.send("ok")
        elif command == "emitted":
            commands.send(dict(emitted))
        elif command == "stop":
            providers.stop()
            commands.send("ok")
            return


class ProviderProcess:
    """Drives a FakeProviders server running in a child process."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._commands, child = multiprocessing.Pipe()
        self._process = multiprocessing.get_context("spawn").Process(target=_serve, args=(port, child), daemon=True)
        self._process.start()
        if self._commands.recv() != "ready":
            raise RuntimeError("the provider process did not start")

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _call(self, command: str, argument: Any = None) -> Any:
        self._commands.send((command, argument))
        return self._commands.recv()

    def script(self, *answers: list[Step]) -> None:
        self._call("script", list(answers))

    def emitted(self) -> dict[str, float]:
        result: dict[str, float] = self._call("emitted")
        return result

    def stop(self) -> None:
        if self._process.is_alive():
            self._call("stop")
            self._process.join(5)
