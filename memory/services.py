"""Writes of the memory: add, remember (a tool call's idempotent add), update and delete facts.

Every change compares the version the caller read; a stale one changes nothing. Deleting
turns a fact into a tombstone (no content, version kept) that nothing revives; the owner
may delete many facts at once, each at its own version. The search index follows each
write inside the same transaction (see `memory.models`).

The tools pass `proceed`, which each write calls inside its own transaction right before
writing: it says whether the call's turn still runs and its conversation still exists.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from flarebot.core.rows import transaction_lock
from flarebot.core.text import (
    has_control_characters,
    has_disguising_characters,
    has_lone_surrogates,
    line_breaks_normalize,
    utf16_length,
)
from memory.errors import (
    DeleteItemsInvalid,
    FactConflict,
    FactInvalid,
    FactNotFound,
    FactTooLong,
    MemoryFull,
    WriteAbandoned,
)
from memory.models import Fact, FactState
from memory.selectors import fact_view

MAX_FACTS = 200  # active facts; tombstones do not count
MAX_CONTENT = 1_000  # UTF-16 code units, as browsers count
# Held by every add until its transaction ends, so that the count under MAX_FACTS holds.
FACTS_ADD_LOCK = "memory:facts-add"
# Facts one request may delete: every active fact at once, so a page never splits its selection.
MAX_DELETE = MAX_FACTS

# The ids of facts that `remember` calls make: uuid5 of this namespace and "conversation:call".
REMEMBER_NAMESPACE = uuid.UUID("5b0e3f4e-6a51-4f0b-9d55-0c7f2f6a1e2d")

Proceed = Callable[[], bool]


def _always() -> bool:
    return True


def fact_content_clean(content: str) -> str:
    """Return a fact's text with its line breaks as `\n`, or refuse it before anything is written."""
    content = line_breaks_normalize(content)
    if has_lone_surrogates(content):
        raise FactInvalid("content: not valid text (a lone UTF-16 surrogate).")
    if has_control_characters(content, allow="\n\t"):
        raise FactInvalid("content: only tabs and line breaks may be control characters.")
    if has_disguising_characters(content):  # the rule names keep: a fact must read as what it holds
        raise FactInvalid("content: must not contain direction controls or invisible characters.")
    if not content.strip():
        raise FactInvalid("content: must not be blank.")
    if utf16_length(content) > MAX_CONTENT:
        raise FactTooLong(f"content: at most {MAX_CONTENT:,} characters (UTF-16 code units).")
    return content


def remember_id(*, conversation_id: uuid.UUID, tool_call_id: str) -> uuid.UUID:
    """Return the id of the fact a `remember` call makes: the same for every replay of the call."""
    return uuid.uuid5(REMEMBER_NAMESPACE, f"{conversation_id}:{tool_call_id}")


def _check_proceed(proceed: Proceed) -> None:
    if not proceed():
        raise WriteAbandoned()


def _add(*, fact_id: uuid.UUID | None, content: str) -> Fact:
    """Insert an active fact inside the caller's transaction, under the add lock, within the limit."""
    if Fact.objects.filter(state=FactState.ACTIVE).count() >= MAX_FACTS:
        raise MemoryFull(f"Memory is full: at most {MAX_FACTS} facts. Delete one to add another.")
    if fact_id is None:
        return Fact.objects.create(content=content)
    return Fact.objects.create(id=fact_id, content=content)


def fact_create(*, content: str) -> Fact:
    """Add a fact (the owner's)."""
    content = fact_content_clean(content)
    with transaction.atomic():
        transaction_lock(FACTS_ADD_LOCK)
        return _add(fact_id=None, content=content)


def fact_remember(*, fact_id: uuid.UUID, content: str, proceed: Proceed = _always) -> tuple[Fact, bool]:
    """Add a fact under a given id unless that id was used before; return it and whether it is new.

    A replay finds the fact it made, or its tombstone, and writes nothing: a deleted fact
    never comes back.
    """
    content = fact_content_clean(content)
    with transaction.atomic():
        transaction_lock(FACTS_ADD_LOCK)
        existing = Fact.objects.filter(id=fact_id).first()
        if existing is not None:
            return existing, False
        _check_proceed(proceed)
        return _add(fact_id=fact_id, content=content), True


def _stale(fact_id: uuid.UUID, version: int) -> FactConflict | None:
    """Why a conditional write of an active fact changed nothing: a conflict, or None when it is absent."""
    current = Fact.objects.filter(id=fact_id, state=FactState.ACTIVE).first()
    if current is None:
        return None
    return FactConflict(
        f"This fact was changed elsewhere: it is at version {current.version}, not {version}.",
        current=fact_view(current),
    )


def fact_update(*, fact_id: uuid.UUID, content: str, version: int, proceed: Proceed = _always) -> Fact:
    """Replace an active fact's text if it is still at `version`; never creates a fact."""
    content = fact_content_clean(content)
    with transaction.atomic():
        _check_proceed(proceed)
        # One conditional UPDATE decides: of two edits based on the same version, the
        # second finds the version moved on (PostgreSQL re-reads the row after the first
        # commits; SQLite runs one writer at a time) and changes nothing.
        changed = Fact.objects.filter(id=fact_id, state=FactState.ACTIVE, version=version).update(
            content=content, version=F("version") + 1, updated_at=timezone.now()
        )
        if changed:
            return Fact.objects.get(id=fact_id)
        conflict = _stale(fact_id, version)
        if conflict is None:
            raise FactNotFound()
        raise conflict


def _tombstone(*, fact_id: uuid.UUID, version: int, now: datetime) -> bool:
    """Make the active fact at `version` a tombstone in one conditional UPDATE; return whether it did."""
    # Of two deletes (or an edit and a delete) based on the same version, the second finds
    # the version moved on and changes nothing, as in fact_update.
    return bool(
        Fact.objects.filter(id=fact_id, state=FactState.ACTIVE, version=version).update(
            state=FactState.DELETED, content="", deleted_at=now, updated_at=now, version=F("version") + 1
        )
    )


def fact_delete(*, fact_id: uuid.UUID, version: int, proceed: Proceed = _always) -> bool:
    """Make an active fact at `version` a tombstone; return False when there was no active fact."""
    with transaction.atomic():
        _check_proceed(proceed)
        if _tombstone(fact_id=fact_id, version=version, now=timezone.now()):
            return True
        conflict = _stale(fact_id, version)
        if conflict is None:
            return False
        raise conflict


DeleteOutcome = Literal["deleted", "absent", "version_conflict"]


@dataclass(frozen=True)
class FactDeletion:
    """What a bulk delete did with one fact; `current` is the fact as it is now after a conflict."""

    fact_id: uuid.UUID
    outcome: DeleteOutcome
    current: Fact | None = None


def facts_delete_check(count: int) -> None:
    """Refuse a bulk delete that names no fact, or more than MAX_DELETE."""
    if count < 1:
        raise DeleteItemsInvalid("Name at least one fact to delete.")
    if count > MAX_DELETE:
        raise DeleteItemsInvalid(f"At most {MAX_DELETE} facts can be deleted at once.")


def facts_delete(*, items: Sequence[tuple[uuid.UUID, int]], proceed: Proceed = _always) -> list[FactDeletion]:
    """Delete each (id, version) as fact_delete would, in one transaction; return each outcome, in order.

    A stale version keeps its fact (`version_conflict`, with the fact as it is now) while
    the others are deleted; an id with no active fact is `absent`, which deleting it alone
    answers with success too. Items apply in the order named, so a fact named again after
    it was deleted is `absent`.
    """
    facts_delete_check(len(items))
    done: list[FactDeletion] = []
    with transaction.atomic():
        _check_proceed(proceed)
        # Every named row is locked first, in id order (PostgreSQL; SQLite's IMMEDIATE
        # transaction holds its only write lock already): two bulk deletes over the same
        # facts, named in any order, then never wait on each other in a cycle.
        list(Fact.objects.select_for_update().filter(id__in={i for i, _ in items}).order_by("id").values_list("id"))
        now = timezone.now()
        for fact_id, version in items:
            if _tombstone(fact_id=fact_id, version=version, now=now):
                done.append(FactDeletion(fact_id, "deleted"))
                continue
            current = Fact.objects.filter(id=fact_id, state=FactState.ACTIVE).first()
            outcome = (
                FactDeletion(fact_id, "absent")
                if current is None
                else FactDeletion(fact_id, "version_conflict", current)
            )
            done.append(outcome)
    return done
