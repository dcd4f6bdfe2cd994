"""Turn starts that arrive together are claimed together, a few database trips per burst.

A burst of rings (a hundred conversations answered at once, or a worker coming back to a
queue) would otherwise cost each turn its own transaction: a settings read, the claim,
the transcript, a commit, each a round trip that competes with the streams already
running. Here the starts that wait while others are being claimed go in the next batch
(`preparation.attempts_start`): one transaction for all of them. A turn alone starts at
once, as before; one failing start fails only its own turn.
"""

from __future__ import annotations

import uuid

from conversations import doorbell
from conversations.engine.preparation import Started, attempts_start
from flarebot.core.batching import BatchedCalls
from flarebot.core.database import db
from flarebot.core.loops import PerLoop

# Batches claimed at once: a second one starts while the first is in its transaction, so a
# ring that arrives then waits for no batch but its own; more would only share the CPU.
IN_FLIGHT = 2
# At most this many turns in one transaction, the most one pop of the doorbell hands out:
# a batch's row locks are held until the last of its turns is prepared.
BATCH = doorbell.BATCH

_batchers: PerLoop[BatchedCalls[uuid.UUID, Started | None]] = PerLoop(
    lambda: BatchedCalls(db(attempts_start), in_flight=IN_FLIGHT, batch=BATCH)
)


async def turn_start(turn_id: uuid.UUID) -> Started | None:
    """Claim and prepare a turn's attempt (see `attempt_start`); None when it may not run here.

    A failed start raises its own error; a cancelled caller's claim, if it got one, expires.
    """
    return await _batchers.get().call(turn_id)
