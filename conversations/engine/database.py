"""Database work awaited from the engine's event loop, on long-lived executor threads."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, connections

T = TypeVar("T")


def db(function: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    """Wrap a synchronous database function to be awaited from the engine loop."""

    def call(*args: Any, **kwargs: Any) -> T:
        connection = connections[DEFAULT_DB_ALIAS]
        # Threads here live long: drop a connection that broke (database restart) so the
        # next call reconnects, without paying a reconnect on every call.
        if connection.connection is not None and connection.errors_occurred:
            connection.close_if_unusable_or_obsolete()
        try:
            return function(*args, **kwargs)
        finally:
            # CONN_MAX_AGE=0 means "do not keep connections": honour it here too.
            if not connection.settings_dict.get("CONN_MAX_AGE"):
                connection.close()

    return sync_to_async(call, thread_sensitive=False)
