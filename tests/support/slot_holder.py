"""A separate process that takes places of a tool's concurrency limit, as a worker would.

Run by tests/tools/test_slots.py (twice at once) with the test run's database in the
environment: it starts `calls` calls together, each waiting for a place through the real
`tools.slots.slot_wait`, holding it for `hold` seconds, and prints one JSON line per call
with when it held its place (wall-clock seconds, comparable across processes).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import timedelta


async def _call(tool: str, limit: int, hold: float) -> dict[str, float | bool]:
    from django.db import close_old_connections

    from flarebot.core.database import db
    from tools.slots import slot_release, slot_wait

    held = await slot_wait(tool=tool, limit=limit, hold_for=timedelta(seconds=60), wait_at_most=60)
    if held is None:
        return {"held": False}
    start = time.time()
    await asyncio.sleep(hold)
    end = time.time()
    await db(slot_release)(held=held)
    await db(close_old_connections)()
    return {"held": True, "start": start, "end": end}


async def _main(tool: str, limit: int, calls: int, hold: float) -> None:
    results = await asyncio.gather(*(_call(tool, limit, hold) for _ in range(calls)))
    for result in results:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")
    import django

    django.setup()
    tool, limit, calls, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    asyncio.run(_main(tool, limit, calls, hold))
