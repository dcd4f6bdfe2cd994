"""Signals the conversations app sends to apps above it.

`conversation_torn_down` is sent (with `conversation_id`) while a deleted conversation's
data is torn down, inside that teardown, before its row disappears. Upper apps (tasks)
subscribe with a service of their own to drop or tombstone what refers to it. Receivers
must be idempotent: an interrupted teardown is run again.
"""

from __future__ import annotations

from django.dispatch import Signal

conversation_torn_down = Signal()
