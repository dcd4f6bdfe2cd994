"""Every hand-written SQL statement of the conversations app (see flarebot.core.rows for why).

They are the hot path's: submitting, claiming, streamed windows, the sequence allocator,
the settings a turn starts from; and the search. Each function is one statement (or its
builder); the rules they hold as SQL (a lease is over, the next sequence) are each in one
function, and `turns`, the event log and the engine decide what the rows mean. Column
names come from the models. A step is one statement on PostgreSQL (data-modifying CTEs)
and the same rows statement by statement on SQLite; vendor branches stay in this package.
They run inside the caller's transaction.

- `turns`: submitting a turn (the turn ordinal's allocator), its end, what an attempt reads.
- `claim`: the lease rules, the claim, renewals, recovery's reads.
- `sequences`: the event log's sequence allocator.
- `stream`: streamed windows, one by one or in a batch, and the stream store's connection.
- `search`: conversation search.
"""

from __future__ import annotations

from conversations.sql.claim import (
    AttemptLimits,
    Claimed,
    Unclaimed,
    turn_claim_running,
    turn_lease_set,
    turn_lock_unclaimed,
    turn_progress_record,
    turns_claimable,
    turns_held,
    turns_lease_over,
)
from conversations.sql.search import MARK_END, MARK_START, SearchHit, search_entries_match, search_entries_upsert
from conversations.sql.sequences import sequences_allocate
from conversations.sql.stream import (
    STREAM_SESSION_SETUP,
    message_parts_store,
    stream_batch_sql,
    stream_connection_params,
    synchronous_commit_off_for_transaction,
)
from conversations.sql.turns import (
    conversation_reserve_turn,
    transcript_until,
    turn_end_set,
    turn_first_unfinished,
    turn_lock_owned,
    turn_settings_row,
    turn_steps_set,
    turn_submit,
)

__all__ = [
    "MARK_END",
    "MARK_START",
    "STREAM_SESSION_SETUP",
    "AttemptLimits",
    "Claimed",
    "SearchHit",
    "Unclaimed",
    "conversation_reserve_turn",
    "message_parts_store",
    "search_entries_match",
    "search_entries_upsert",
    "sequences_allocate",
    "stream_batch_sql",
    "stream_connection_params",
    "synchronous_commit_off_for_transaction",
    "transcript_until",
    "turn_claim_running",
    "turn_end_set",
    "turn_first_unfinished",
    "turn_lease_set",
    "turn_lock_owned",
    "turn_lock_unclaimed",
    "turn_progress_record",
    "turn_settings_row",
    "turn_steps_set",
    "turn_submit",
    "turns_claimable",
    "turns_held",
    "turns_lease_over",
]
