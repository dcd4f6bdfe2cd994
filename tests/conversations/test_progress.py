"""Progress coalescing: the first report at once, then at most four writes a second, none lost."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from conversations.engine.tool_calls import PROGRESS_INTERVAL, ProgressCoalescer


class Recorder:
    def __init__(self) -> None:
        self.writes: list[tuple[float, int]] = []
        self.started = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.started

    async def write(self, progress: dict[str, Any], began: float | None = None) -> None:
        """Record when the write began (what the coalescer spaces), in the order writes end."""
        self.writes.append((self.now() if began is None else began, progress["done"]))


async def written(recorder: Recorder, count: int) -> list[int]:
    """Wait until `count` writes ended (bounded far above any machine's delay); what was written."""
    deadline = time.monotonic() + 20
    while len(recorder.writes) < count:
        assert time.monotonic() < deadline, f"only {recorder.writes} written"
        await asyncio.sleep(0.01)
    return [done for _, done in recorder.writes]


async def test_it_writes_the_first_report_at_once_and_the_latest_of_a_burst_after_the_interval():
    recorder = Recorder()
    progress = ProgressCoalescer(recorder.write)
    for done in range(1, 11):
        await progress.report({"done": done})

    assert [done for _, done in recorder.writes] == [1]
    assert await written(recorder, 2) == [1, 10]
    assert recorder.writes[1][0] >= PROGRESS_INTERVAL
    await asyncio.sleep(2 * PROGRESS_INTERVAL)  # nothing else waits to be written
    assert [done for _, done in recorder.writes] == [1, 10]
    assert await progress.close() is None


async def test_it_writes_a_report_that_arrives_during_a_delayed_write_without_another_report():
    recorder = Recorder()
    writing_two, may_finish_two = asyncio.Event(), asyncio.Event()

    async def write(report: dict[str, Any]) -> None:
        began = recorder.now()
        if report["done"] == 2:  # a slow write, held until the next report came during it
            writing_two.set()
            await asyncio.wait_for(may_finish_two.wait(), 20)
        await recorder.write(report, began)

    progress = ProgressCoalescer(write)
    await progress.report({"done": 1})
    await progress.report({"done": 2})  # waits for the interval
    await asyncio.wait_for(writing_two.wait(), 20)  # its write is under way now
    await progress.report({"done": 3})  # comes during that write
    may_finish_two.set()

    assert await written(recorder, 3) == [1, 2, 3]
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
