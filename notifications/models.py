"""Where the owner is told of what happened while away, what was told, and how it went.

A `Notification` is written in the transaction of the event that causes it (its `key` is
unique: an event written twice tells once). Each of it gets one `Delivery` per destination
in that transaction; a delivery is sent by a job that claims it first (`status` moves from
pending to sending with a fresh `claim` in one conditional update), so a restarted worker
or a duplicated job never sends it twice. A burst of one kind to one destination goes as
one message, and so does everything quiet hours held; what no longer holds when its time
comes (a question answered, a proposal taken) is dropped, not sent.
"""

from __future__ import annotations

from django.db import models

from flarebot.core.models import BaseModel, SingletonModel


class Kind(models.TextChoices):
    NEEDS_ANSWER = "needs_answer", "A browser task needs an answer"
    PROPOSAL = "proposal", "An unattended run proposed a browser task"
    RUN_FAILED = "run_failed", "A task run failed or was missed"
    BROWSER_FINISHED = "browser_finished", "A browser task finished"
    RUN_COMPLETED = "run_completed", "A task run completed"


class Destination(BaseModel):
    """An Apprise URL the owner added, sealed like provider keys; only `masked` is ever shown."""

    label = models.CharField(max_length=60)
    sealed = models.BinaryField()
    masked = models.CharField(max_length=80)

    class Meta:
        indexes = [
            # destination_list: in the order they were added
            models.Index(fields=["created_at"], name="notif_destination_created"),
        ]

    def __str__(self) -> str:
        return f"destination {self.label}"


class NotificationSettings(SingletonModel):
    """The kinds the owner wants and the quiet hours; absent means the defaults."""

    needs_answer = models.BooleanField(default=True)
    proposal = models.BooleanField(default=True)
    run_failed = models.BooleanField(default=True)
    browser_finished = models.BooleanField(default=True)
    run_completed = models.BooleanField(default=False)
    quiet_enabled = models.BooleanField(default=False)
    quiet_start = models.TimeField(null=True, blank=True)
    quiet_end = models.TimeField(null=True, blank=True)
    quiet_time_zone = models.CharField(max_length=64, default="UTC")

    class Meta(SingletonModel.Meta):
        constraints = [
            *SingletonModel.Meta.constraints,
            models.CheckConstraint(
                condition=models.Q(quiet_enabled=False) | models.Q(quiet_start__isnull=False, quiet_end__isnull=False),
                name="notif_settings_quiet_shape",
            ),
        ]


class Notification(BaseModel):
    """One thing to tell the owner: a title, a bounded one-line summary and the path of its card."""

    kind = models.CharField(max_length=32, choices=Kind.choices)
    # What caused it ("run:<id>:failed", "critical_point:<id>", ...): the same cause tells once.
    key = models.CharField(max_length=200, unique=True)
    conversation_id = models.UUIDField()
    title = models.CharField(max_length=120)
    summary = models.CharField(max_length=200)
    path = models.CharField(max_length=300)
    # What it is about ("browser_task:<id>", "task:<id>"): one subject's messages go in order.
    subject = models.CharField(max_length=80, blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(kind__in=Kind.values), name="notif_notification_kind_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"  # waiting for its time (a retry, the coalescing minute, quiet hours' end)
    SENDING = "sending", "Sending"  # claimed by a job; never claimed again
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"  # the last try failed, or a worker stopped while sending it
    # What it told no longer held when its time came (the question was answered, denied or
    # its task ended; the proposal was started or dismissed): never sent.
    DROPPED = "dropped", "Dropped"


class Delivery(BaseModel):
    """A notification on its way to one destination."""

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="deliveries")
    destination = models.ForeignKey(Destination, on_delete=models.CASCADE, related_name="+", db_index=False)
    kind = models.CharField(max_length=32, choices=Kind.choices)  # the notification's, for coalescing
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    due_at = models.DateTimeField()
    held = models.BooleanField(default=False)  # quiet hours hold it for their summary
    attempts = models.PositiveSmallIntegerField(default=0)
    claim = models.UUIDField(null=True, blank=True)  # the send that took it
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    # A safe, bounded reason of the last failure (never the receiver's answer or the URL).
    error = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["destination", "notification"], name="notif_delivery_once"),
            models.CheckConstraint(
                condition=models.Q(status__in=DeliveryStatus.values), name="notif_delivery_status_valid"
            ),
            models.CheckConstraint(condition=models.Q(kind__in=Kind.values), name="notif_delivery_kind_valid"),
        ]
        indexes = [
            # _take: a destination's pending deliveries that are due (and all of them, for
            # _drop_resolved and _keep_order)
            models.Index(fields=["destination", "status", "due_at"], name="notif_delivery_due"),
            # _take (the coalescing minute): the last message of a kind claimed for a destination
            models.Index(fields=["destination", "kind", "claimed_at"], name="notif_delivery_last_claim"),
            # notifications_sweep: due pending deliveries and stale claims of every destination
            models.Index(fields=["status", "due_at"], name="notif_delivery_sweep"),
            # failures_list: the latest failed deliveries
            models.Index(fields=["status", "updated_at"], name="notif_delivery_failed"),
        ]
