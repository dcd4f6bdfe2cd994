"""The web process: daphne, bounding request bodies before it reads them, logging paths without queries.

daphne reads a request's whole body before the application sees any of it, so a body's
bound acts in its HTTP protocol, as the headers and the bytes arrive (`flarebot.web_bounds`).
A query string can carry what must never reach a log: the one-time setup token
(`/setup/?token=...`) and the words of a search (`/api/conversations/?q=...`). Run it as
daphne is run: `python -m flarebot.web -b 127.0.0.1 -p 8000 flarebot.asgi:application`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory
from daphne.server import Server

ActionLogger = Callable[[str, str, dict[str, Any]], None]


def without_queries(log: ActionLogger) -> ActionLogger:
    """Wrap daphne's access logger so that every path it writes stops before `?`."""

    def log_action(protocol: str, action: str, details: dict[str, Any]) -> None:
        path = details.get("path")
        if isinstance(path, str) and "?" in path:
            details = {**details, "path": path.partition("?")[0] + "?…"}
        log(protocol, action, details)

    return log_action


class WebServer(Server):
    """daphne's server, its access log without queries and its requests bounded."""

    def __init__(self, *args: Any, action_logger: ActionLogger | None = None, **kwargs: Any) -> None:
        super().__init__(*args, action_logger=without_queries(action_logger) if action_logger else None, **kwargs)

    # daphne's run() builds its HTTP factory inline and keeps it here before it listens: the
    # bounded factory takes its place.
    @property
    def http_factory(self) -> HTTPFactory:
        return self._bounded_factory

    @http_factory.setter
    def http_factory(self, built: HTTPFactory) -> None:
        # Imported now, once daphne has loaded the application: the bounds read Django's routes.
        from flarebot.web_bounds import BoundedHTTPFactory

        self._bounded_factory = BoundedHTTPFactory(self)


class WebCommandLine(CommandLineInterface):
    server_class = WebServer


if __name__ == "__main__":
    WebCommandLine.entrypoint()
