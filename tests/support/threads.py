"""Work on real threads, each with its own database connection, for tests of races."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection, connections


def in_threads(*work: Callable[[], Any]) -> list[Any]:
    """Run each function on a thread of its own; return what each returned or raised."""
    outcomes: list[Any] = [None] * len(work)

    def target(index: int) -> None:
        try:
            outcomes[index] = work[index]()
        except Exception as error:
            outcomes[index] = error
        finally:
            connections.close_all()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive(), "a writer never finished"
    return outcomes


def postgres_lock_awaited(locktype: str, *, seconds: float = 30.0) -> bool:
    """Whether some session waits for a lock of this `pg_locks` type within `seconds` (PostgreSQL).

    A race test uses it to know the second writer really began and is held by the first:
    `advisory` for an advisory lock, `transactionid` for a row another transaction updated.
    """
    deadline = time.monotonic() + seconds
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = %s AND NOT granted", [locktype])
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.02)
    return False
