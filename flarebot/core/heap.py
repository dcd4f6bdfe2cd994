"""Garbage-collector settings for the long-running processes (daphne and the workers).

A started process holds a few hundred thousand objects (Django, the SDKs, their models)
that live as long as it does. Python's cyclic collector walks all of them in every full
collection, a pause of the whole process that lands in the middle of a burst of turns
(the first one after start pays most). Freezing the objects
that exist once the process is ready takes them out of every later collection, and a
larger young generation makes collections rarer while turns stream.
"""

from __future__ import annotations

import gc

YOUNG_GENERATION_THRESHOLD = 10_000


def heap_settle() -> None:
    """Collect once, then exclude everything alive now from future collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, old)
