"""The web process: daphne, whose access log writes paths without their query strings.

A query string can carry what must never reach a log: the one-time setup token
(`/setup/?token=...`) and the words of a search (`/api/conversations/?q=...`). Run it as
daphne is run: `python -m flarebot.web -b 127.0.0.1 -p 8000 flarebot.asgi:application`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daphne.cli import CommandLineInterface
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


class QuerylessServer(Server):
    def __init__(self, *args: Any, action_logger: ActionLogger | None = None, **kwargs: Any) -> None:
        super().__init__(*args, action_logger=without_queries(action_logger) if action_logger else None, **kwargs)


class WebCommandLine(CommandLineInterface):
    server_class = QuerylessServer


if __name__ == "__main__":
    WebCommandLine.entrypoint()
