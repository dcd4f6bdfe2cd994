"""Progress coalescing: the first report at once, then at most four writes a second, none lost."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from conversations.engine.tool_calls import PROGRESS_INTERVAL, ProgressCoalescer


class Recorder:
    def __init__(self, write_seconds: float = 0.0) -> None:
        self.writes: list[tuple[float, int]] = []
        self.write_seconds = write_seconds
        self.started = time.monotonic()

    async def write(self, progress: dict[str, Any]) -> None:
        """Record when the write began (what the coalescer spaces), in the order writes end."""
        began = time.monotonic() - self.started
        await asyncio.sleep(self.write_seconds)
        self.writes.append((began, progress["done"]))


async def test_it_writes_the_first_report_at_once_and_the_latest_of_a_burst_after_the_interval():
    recorder = Recorder()
    progress = ProgressCoalescer(recorder.write)
    for done in range(1, 11):
        await progress.report({"done": done})

    assert [done for _, done in recorder.writes] == [1]
    await asyncio.sleep(PROGRESS_INTERVAL + 0.1)
    assert [done for _, done in recorder.writes] == [1, 10]
    assert recorder.writes[1][0] >= PROGRESS_INTERVAL
    assert await progress.close() is None


async def test_it_writes_a_report_that_arrives_during_a_delayed_write_without_another_report():
    recorder = Recorder(write_seconds=0.1)
    progress = ProgressCoalescer(recorder.write)
    await progress.report({"done": 1})
    await progress.report({"done": 2})  # waits for the interval
    await asyncio.sleep(PROGRESS_INTERVAL + 0.05)  # its write is under way now
    await progress.report({"done": 3})  # comes during that write

    await asyncio.sleep(2 * PROGRESS_INTERVAL + 0.2)
    assert [done for _, done in recorder.writes] == [1, 2, 3]
    gaps = [b - a for (a, _), (b, _) in zip(recorder.writes, recorder.writes[1:], strict=False)]
    assert all(gap >= PROGRESS_INTERVAL - 0.01 for gap in gaps)


async def test_it_hands_the_unwritten_latest_report_to_the_final_update_and_ignores_later_ones():
    recorder = Recorder()
    progress = ProgressCoalescer(recorder.write)
    await progress.report({"done": 1})
    await progress.report({"done": 2})

    assert await progress.close() == {"done": 2}
    await progress.report({"done": 3})
    await asyncio.sleep(PROGRESS_INTERVAL + 0.1)
    assert [done for _, done in recorder.writes] == [1]
