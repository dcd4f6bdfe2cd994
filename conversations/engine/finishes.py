"""Turns that end together are ended together: one transaction per batch, one batch at a time.

A hundred streams that started together end together. Ended one by one on the loop's
database threads, a hundred transactions (the end, its event, the search index, the next
turn's lookup, a commit each) competed with the streams still writing their last deltas
for the cores, and stretched them. Here ends that arrive while a batch is in its
transaction go in the next one (`turns.turns_finish`), on one thread: a turn alone ends at
once, as before, and one failing end fails only its own turn.
"""

from __future__ import annotations

from conversations import doorbell
from conversations.turns import Finish, turns_finish
from flarebot.core.batching import BatchedCalls
from flarebot.core.database import db
from flarebot.core.loops import PerLoop

# One batch at a time: the ends are not urgent enough to take the cores from live streams.
IN_FLIGHT = 1
BATCH = doorbell.BATCH  # as many as start together, with their row locks held until the commit

_batchers: PerLoop[BatchedCalls[Finish, bool]] = PerLoop(
    lambda: BatchedCalls(db(turns_finish), in_flight=IN_FLIGHT, batch=BATCH)
)


async def turn_end(finish: Finish) -> bool:
    """End a turn this attempt owns (see `turn_finish`); whether it was still its own."""
    return await _batchers.get().call(finish)
