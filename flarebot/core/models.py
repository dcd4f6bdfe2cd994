"""The base model every Flarebot model extends, and the core's own rows."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class BaseModel(models.Model):
    """UUID primary key and creation/update times, as every model here has."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Installation(BaseModel):
    """The single row that ties this database to its schema version and its owner.

    Written once by `createowner`; every request verifies it and fails closed when it is
    missing, duplicated, of another schema version, or no longer matches the owner.
    """

    # A constant column under a unique constraint: a second installation row cannot exist.
    singleton = models.BooleanField(default=True, editable=False)
    schema_version = models.PositiveIntegerField()
    installation_id = models.UUIDField(unique=True, default=uuid.uuid4, editable=False)
    owner = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # The owner's username when the installation was made: a renamed or replaced owner
    # account no longer matches and the installation fails closed.
    owner_username = models.CharField(max_length=150)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["singleton"], name="core_installation_single_row"),
            models.CheckConstraint(condition=models.Q(singleton=True), name="core_installation_singleton_true"),
        ]

    def __str__(self) -> str:
        return f"installation {self.installation_id} owned by {self.owner_username}"


class SignInFailure(BaseModel):
    """One sign-in attempt, counted before its password is checked; it stays as a failure unless it succeeded."""

    client = models.CharField(max_length=64)
    account = models.CharField(max_length=150)

    class Meta:
        indexes = [
            # signin_attempt_reserve: attempts of one client and account in the window
            models.Index(fields=["client", "account", "created_at"], name="core_signinfail_client_acct"),
            # signin_attempt_reserve: attempts of one client in the window
            models.Index(fields=["client", "created_at"], name="core_signinfail_client"),
            # signin_attempt_reserve: the purge of attempts older than the window
            models.Index(fields=["created_at"], name="core_signinfail_created"),
        ]

    def __str__(self) -> str:
        return f"failed sign-in for {self.account} from {self.client}"


class SingletonModel(BaseModel):
    """A model with at most one row: a constant column under a unique constraint."""

    singleton = models.BooleanField(default=True, editable=False)

    class Meta:
        abstract = True
        constraints = [
            models.UniqueConstraint(fields=["singleton"], name="%(app_label)s_%(class)s_single_row"),
            models.CheckConstraint(condition=models.Q(singleton=True), name="%(app_label)s_%(class)s_singleton_true"),
        ]


class Heartbeat(BaseModel):
    """The latest sign of life of a long-running process, and what it found on its machine.

    Workers write theirs every few seconds (`heartbeat.py`), with the results of the
    optional-part probes (Chromium, the Docker engine, ...); the reconciliation job that
    beat sends writes the scheduler's. The System section reads them.
    """

    name = models.CharField(max_length=200, unique=True)  # the worker's Celery name, or "beat"
    kind = models.CharField(max_length=16)
    detail = models.JSONField(default=dict)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.kind} {self.name}"
