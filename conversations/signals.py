"""Signals the conversations app sends to apps above it.

`conversation_torn_down` is sent (with `conversation_id`) while a deleted conversation's
data is torn down, inside that teardown, before its row disappears. Upper apps (tasks)
subscribe with a service of their own to drop or tombstone what refers to it. Receivers
must be idempotent: an interrupted teardown is run again.

`turn_ended` is sent (with `turn_id`, `conversation_id` and the terminal `status`) inside
the transaction that ends a turn, after its closing event was appended. Receivers that
write should do so after commit (`transaction.on_commit`); the turn's end does not wait
for them, and a receiver that fails must not undo it. Upper apps (tasks) use it to project
the runs they started; their own reconciliation repairs what a lost receiver missed.

`events_stored` is sent (with `rows`: each stored event's `conversation_id`, `sequence`,
`kind`, `turn_id` and `data`) by `eventlog.events_insert`, the one place events are
written, inside the writer's transaction. Receivers write in that transaction, so what
they derive from an event is committed with it or not at all; they must be cheap for the
kinds they ignore (streamed text passes here), and must not raise for an event they
cannot use. Upper apps (notifications) use it to record what the owner is told.
"""

from __future__ import annotations

from django.dispatch import Signal

conversation_torn_down = Signal()
turn_ended = Signal()
events_stored = Signal()
