"""Explicit memory: the facts the owner (or the agent, when asked) chose to keep.

A fact is a short text with a version that every change compares. Deleting a fact keeps
a content-free tombstone (id, version, times) for ever, so that a retried `remember` of
the same tool call can never bring the fact back; tombstones do not count toward the
limit of active facts.

Full-text search lives beside the table and is kept in step with every write by the
database itself, in the same transaction (see the `0002_search` migration): an FTS5
table maintained by triggers on SQLite, a generated `tsvector` column with a GIN index
on PostgreSQL. `memory.sql` holds the statements that read them.
"""

from __future__ import annotations

from django.db import models

from flarebot.core.models import BaseModel


class FactState(models.TextChoices):
    ACTIVE = "active", "Active"
    # A tombstone: content cleared, id and version kept so that replays cannot revive it.
    DELETED = "deleted", "Deleted"


class Fact(BaseModel):
    content = models.TextField(blank=True, default="")
    version = models.PositiveIntegerField(default=1)
    state = models.CharField(max_length=16, choices=FactState.choices, default=FactState.ACTIVE)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(state__in=FactState.values), name="memory_fact_state_valid"),
            models.CheckConstraint(condition=models.Q(version__gte=1), name="memory_fact_version_positive"),
            # An active fact has text and no deletion time; a tombstone has neither text nor
            # a missing deletion time.
            models.CheckConstraint(
                condition=(
                    models.Q(state=FactState.ACTIVE, deleted_at__isnull=True) & ~models.Q(content="")
                    | models.Q(state=FactState.DELETED, deleted_at__isnull=False, content="")
                ),
                name="memory_fact_tombstone_shape",
            ),
        ]
        indexes = [
            # fact_list: active facts, newest first; and the limit's count of active facts
            models.Index(fields=["state", "-created_at", "id"], name="memory_fact_list"),
        ]

    def __str__(self) -> str:
        return f"fact {self.id} (deleted)" if self.state == FactState.DELETED else f"fact {self.id}"
