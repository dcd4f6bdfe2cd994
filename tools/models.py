"""Tool activity: safe, bounded metadata about each tool call, for the owner's activity cards.

Not a second transcript: inputs and results stay in the message's tool parts. A row holds
only a label, a status, optional progress, a short summary that the tool's descriptor
chose to expose and a hint for the owner that the tool gave. `conversation_id` is a plain
UUID (tools sits below conversations); deleting a conversation deletes its rows through
`activities_delete`.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from flarebot.core.models import BaseModel


class ActivityStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    INTERRUPTED = "interrupted", "Interrupted"  # its worker died; the outcome is unknown
    UNAVAILABLE = "unavailable", "Unavailable"  # not configured here; answered at once, never run


class ToolActivity(BaseModel):
    # Set by the engine when the call starts (not at insert), so the time in the first
    # activity.updated event and the stored row agree; pages are cut by it.
    created_at = models.DateTimeField(default=timezone.now)
    conversation_id = models.UUIDField()
    turn_id = models.UUIDField()
    tool_call_id = models.CharField(max_length=128)
    kind = models.CharField(max_length=64)
    label = models.CharField(max_length=160)
    status = models.CharField(max_length=16, choices=ActivityStatus.choices, default=ActivityStatus.PENDING)
    progress = models.JSONField(null=True, blank=True)
    summary = models.CharField(max_length=160, blank=True, default="")
    # What an operator can do about the outcome, for the owner's card; never sent to the model.
    hint = models.CharField(max_length=500, blank=True, default="")
    execution_count = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The latest interruption (its worker died mid-call), kept when the call runs again.
    interrupted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn_id", "tool_call_id"], name="tools_activity_call_unique"),
            models.CheckConstraint(
                condition=models.Q(status__in=ActivityStatus.values), name="tools_activity_status_valid"
            ),
        ]
        indexes = [
            # activity_page: a conversation's activities, newest creation first
            models.Index(fields=["conversation_id", "-created_at", "-id"], name="tools_activity_page"),
            # attention_items: calls refused for want of configuration, newest first
            models.Index(
                fields=["-created_at"], name="tools_activity_unavailable", condition=models.Q(status="unavailable")
            ),
        ]


class ToolSlot(BaseModel):
    """One of the `concurrency` places of a tool, held by one running call.

    The limit holds across worker processes because a place is a row under a unique
    constraint: a call takes place `n` by inserting it (or by taking it over once its
    holder's lease ran out: the holder's process died). `expires_at` is past the longest
    the holder can run (its deadline plus grace), so a crash frees its place without a sweep.
    """

    tool = models.CharField(max_length=64)
    slot = models.PositiveIntegerField()
    holder = models.CharField(max_length=32)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            # slot_acquire: one holder per place of a tool (also its lookup index)
            models.UniqueConstraint(fields=["tool", "slot"], name="tools_slot_unique"),
        ]


class BrowserLeaseState(models.TextChoices):
    OPEN = "open", "Open"  # recorded before the context opens: it may exist
    CLOSED = "closed", "Closed"  # its closure was confirmed (or its browser died with its process)
    CLEANUP_FAILED = "cleanup_failed", "Cleanup failed"  # retries exhausted; left unresolved


class BrowserLease(BaseModel):
    """One browser context (of a browser_read call or a browser task), recorded before it opens.

    The context lives in one worker process (`holder`: host, pid and start time); only that
    process can close it. Others ask it to (`close_requested_at`, which its watcher polls)
    and a cleanup job retries. `conversation_id` is a plain UUID, never a foreign key: a
    lease outlives its conversation's deletion until its browser is confirmed closed.

    A browser task's context is leased with the task's id as `turn_id` and
    `tool_call_id="browser_task"`; its expiry moves with the task (`browser_lease_extend`:
    the running task's heartbeat, then the end of the time a paused task's context is
    kept). `wake_requested_at` asks the holder to resume the task in the context it keeps.
    """

    conversation_id = models.UUIDField()
    turn_id = models.UUIDField()
    tool_call_id = models.CharField(max_length=128)
    holder = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=BrowserLeaseState.choices, default=BrowserLeaseState.OPEN)
    # The end of the call's budget plus its close: never extended for a call, moved with
    # a browser task (see above).
    expires_at = models.DateTimeField()
    close_requested_at = models.DateTimeField(null=True, blank=True)
    wake_requested_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    cleanup_attempts = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=BrowserLeaseState.values), name="tools_browser_lease_state_valid"
            ),
        ]
        indexes = [
            # browser_leases_request_close (conversation deletion): a conversation's open leases
            models.Index(
                fields=["conversation_id"], name="tools_lease_conversation_open", condition=models.Q(state="open")
            ),
            # browser_leases_close_requested (the holder's watcher) and browser_leases_reconcile
            models.Index(fields=["holder"], name="tools_lease_holder_open", condition=models.Q(state="open")),
            # browser_leases_sweep: open leases past their expiry
            models.Index(fields=["expires_at"], name="tools_lease_expiry_open", condition=models.Q(state="open")),
        ]


class ShellLeaseState(models.TextChoices):
    OPEN = "open", "Open"  # recorded before the container is created: it may exist
    PENDING = "pending", "Removal pending"  # a removal failed or was too slow; the cleanup job retries


class ShellLease(BaseModel):
    """One shell container (`flarebot-sh-<id hex>`), recorded before it is created.

    The row is deleted only once the container's removal is confirmed (or the engine says
    it does not exist), so a row is the only proof a container may still be there; rows
    outlive their conversation's deletion. Any process can remove a container through the
    engine, so there is no "ask the holder": `holder` only tells the reconciliation
    whether the call's process is gone. While a lease exists it keeps its call's place
    under the shell's concurrency limit (`slot`, `slot_holder`): a lease whose removal is
    pending still counts toward the limit.
    """

    conversation_id = models.UUIDField()
    turn_id = models.UUIDField()
    tool_call_id = models.CharField(max_length=128)
    holder = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=ShellLeaseState.choices, default=ShellLeaseState.OPEN)
    # The end of the call's lifetime plus its removal: past it, the call has ended.
    expires_at = models.DateTimeField()
    # Deletion of the conversation asked for removal: a container created after it never starts.
    removal_requested_at = models.DateTimeField(null=True, blank=True)
    slot = models.PositiveIntegerField(null=True, blank=True)
    slot_holder = models.CharField(max_length=32, blank=True, default="")
    cleanup_attempts = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=ShellLeaseState.values), name="tools_shell_lease_state_valid"
            ),
        ]
        indexes = [
            # shell_cleanup (conversation deletion): a conversation's leases
            models.Index(fields=["conversation_id"], name="tools_shell_lease_conversation"),
        ]


class WriteProposalState(models.TextChoices):
    PROPOSED = "proposed", "Proposed"  # waits for the owner
    CONFIRMED = "confirmed", "Confirmed"  # the owner confirmed; the write ran (its result says how it went)
    DISMISSED = "dismissed", "Dismissed"  # the owner said no; nothing was written


class WriteProposal(BaseModel):
    """A write a tainted turn asked for (memory, a scheduled task), held for the owner's confirmation.

    A turn that read untrusted content (a web page, search results, a browser task's pages)
    may have been steered by it, so what it would change outside the turn is stored here
    instead of done: the tool's name and its input exactly as the model gave it, and the
    readback the owner's card shows. Only the owner's Confirm runs it (`tools.proposals`).
    """

    conversation_id = models.UUIDField()
    turn_id = models.UUIDField()
    tool_call_id = models.CharField(max_length=128)
    tool = models.CharField(max_length=64)
    input = models.JSONField()
    readback = models.JSONField()  # {"title": str, "lines": [str]}: what the card shows
    state = models.CharField(max_length=16, choices=WriteProposalState.choices, default=WriteProposalState.PROPOSED)
    result = models.JSONField(null=True, blank=True)  # the write's result once confirmed
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # write_propose: a replayed call finds its proposal (also the lookup index)
            models.UniqueConstraint(fields=["turn_id", "tool_call_id"], name="tools_writeproposal_call_unique"),
            models.CheckConstraint(
                condition=models.Q(state__in=WriteProposalState.values), name="tools_writeproposal_state_valid"
            ),
        ]
        indexes = [
            # write_proposals_delete: a conversation's proposals, when it is deleted or cleared
            models.Index(fields=["conversation_id"], name="tools_writeproposal_conv"),
        ]
