"""Running a browser task: its own model loop on a worker's engine loop, driving a browser session.

One attempt claims the task (`lifecycle.browser_task_claim`), gets its browser context, and
then repeats: read the page, ask the task's model (the conversation's current model and
key) for one action, check it, perform it, record it. The loop ends by finishing the task
or by pausing it at a critical point, which releases the attempt (and its worker slot)
while the context is kept here for the owner's answer.

The context: the one this process keeps for the task if it still has it; otherwise the
checkpoint is restored into a new context, but only after the old one is confirmed closed
(its holder closes it on request; a dead holder's is settled by reconciliation). Approvals
are bound to the context they were given in, so after a restore a held action is asked
again. Whether an action is critical is decided by the runtime (`tools.browser_tasks.critical`).

- `loop`: the claim, the context, the steps and the model (`browser_task_run`).
- `actions`: one action, its checks, and the pause at a critical point.
- `attempt`: an attempt's state, its checkpoint writes and heartbeat.
"""

from __future__ import annotations

from conversations.browser_tasks.runner.loop import browser_task_run

__all__ = ["browser_task_run"]
