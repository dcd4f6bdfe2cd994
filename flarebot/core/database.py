"""Database work awaited from the engine's event loop, on long-lived executor threads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

T = TypeVar("T")

logger = logging.getLogger(__name__)


def db(
    function: Callable[..., T], *, executor: ThreadPoolExecutor | None = None
) -> Callable[..., Coroutine[Any, Any, T]]:
    """Wrap a synchronous database function to be awaited from the engine loop.

    It runs on the loop's default executor, or on `executor` when given.
    """

    def call(*args: Any, **kwargs: Any) -> T:
        return on_long_lived_thread(function, *args, **kwargs)

    return sync_to_async(call, thread_sensitive=False, executor=executor)


def on_long_lived_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call a database function from a thread that lives long and keeps its connection."""
    connection = connections[DEFAULT_DB_ALIAS]
    # Drop a connection that broke (database restart) so the next call reconnects,
    # without paying a reconnect on every call.
    if connection.connection is not None and connection.errors_occurred:
        connection.close_if_unusable_or_obsolete()
    try:
        return function(*args, **kwargs)
    finally:
        # CONN_MAX_AGE=0 means "do not keep connections": honour it here too.
        if not connection.settings_dict.get("CONN_MAX_AGE"):
            connection.close()


def connect_database_threads(executor: ThreadPoolExecutor, count: int) -> None:
    """Open the database connection of each of the executor's threads now, in the background.

    A burst of turns after a quiet start would otherwise open them all at once, each
    costing several milliseconds of CPU just when every turn wants its first answer.
    """
    if not connections[DEFAULT_DB_ALIAS].settings_dict.get("CONN_MAX_AGE"):
        return  # connections are not kept (SQLite): nothing to open ahead
    gathered = threading.Barrier(count, timeout=10)

    def connect() -> None:
        try:
            gathered.wait()  # every thread holds one of these, so each opens its own
        except threading.BrokenBarrierError:
            return
        try:
            connections[DEFAULT_DB_ALIAS].ensure_connection()
        except DatabaseError:
            logger.info("could not open a database connection ahead; turns will open it", exc_info=True)

    for _ in range(count):
        executor.submit(connect)
