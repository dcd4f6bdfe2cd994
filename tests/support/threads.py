"""Work on real threads, each with its own database connection, for tests of races."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connections


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
