"""The durable lifecycle of a browser task: claim, steps, pause, end, projection, reconciliation.

Who runs a task is decided in one place, `browser_task_claim`: a conditional update that
takes a running task of an active conversation that no live attempt holds (`lease_over`,
the one predicate of ownership: its lease time is empty or ran out). Every later write of
the attempt names its lease token, so an attempt that lost its lease changes nothing
(`LeaseLost`). A pause releases the lease: the worker slot is free while the owner thinks,
and the answer makes the task claimable again.

The end of a task is three steps, each committed on its own: the terminal outcome (status,
summary, the `browser_task.finished` event, the checkpoint erased), then its projection
into the conversation as an assistant message (a completed turn of its own, idempotent by
a request id made from the task id, retried by reconciliation, never rerunning browser
work), then the release of its browser context.

- `lease`: the predicate, the claim, renewals and releases.
- `steps`: what an attempt records (steps, a pause, its finish).
- `answer`: the owner's answer as the paused step's result, and what it authorises.
- `end`: the terminal outcome and its projection.
- `recovery`: reconciliation, and the stop of a deleted conversation's tasks.
- `card`, `checkpoint`: the task's activity card; its sealed browser state.
- `record`: the task's record as the owner sees it (its steps, each question and answer).
"""

from __future__ import annotations

from conversations.browser_tasks.lifecycle.answer import task_resume_with
from conversations.browser_tasks.lifecycle.card import MAX_ACTIONS, task_card_events
from conversations.browser_tasks.lifecycle.checkpoint import browser_task_storage_state, storage_seal
from conversations.browser_tasks.lifecycle.end import (
    CANCELLED_SUMMARY,
    SUPERSEDED_SUMMARY,
    browser_task_project,
    task_end_locked,
)
from conversations.browser_tasks.lifecycle.lease import (
    LEASE_RENEW_SECONDS,
    MAX_RUNNING,
    TaskClaim,
    browser_task_cancel_requested,
    browser_task_claim,
    browser_task_context_set,
    browser_task_lease_release,
    browser_task_lease_renew,
    browser_tasks_held,
)
from conversations.browser_tasks.lifecycle.recovery import (
    browser_tasks_reconcile,
    browser_tasks_stop_for_deletion,
    task_run_enqueue,
)
from conversations.browser_tasks.lifecycle.steps import (
    Pause,
    Progress,
    browser_task_finish,
    browser_task_pause,
    browser_task_step_record,
)

__all__ = [
    "CANCELLED_SUMMARY",
    "LEASE_RENEW_SECONDS",
    "MAX_ACTIONS",
    "MAX_RUNNING",
    "SUPERSEDED_SUMMARY",
    "Pause",
    "Progress",
    "TaskClaim",
    "browser_task_cancel_requested",
    "browser_task_claim",
    "browser_task_context_set",
    "browser_task_finish",
    "browser_task_lease_release",
    "browser_task_lease_renew",
    "browser_task_pause",
    "browser_task_project",
    "browser_task_step_record",
    "browser_task_storage_state",
    "browser_tasks_held",
    "browser_tasks_reconcile",
    "browser_tasks_stop_for_deletion",
    "storage_seal",
    "task_card_events",
    "task_end_locked",
    "task_resume_with",
    "task_run_enqueue",
]
