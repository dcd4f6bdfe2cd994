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
"""

from __future__ import annotations

from django.dispatch import Signal

conversation_torn_down = Signal()
turn_ended = Signal()
