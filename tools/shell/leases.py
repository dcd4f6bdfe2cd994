"""Shell leases: the durable record of every shell container, from before its creation to its removal.

A lease row (`ShellLease`) is written before the container is created and deleted only
when the engine confirms the container is gone, so a container can never exist
without a row that explains it (except for a moment a crash leaves, which the
reconciliation removes by its labels). The services here are the only writes:

- `shell_lease_open` before creation; `shell_lease_removed` once removal is confirmed
  (it also gives back the lease's place under the concurrency limit).
- `shell_lease_pending` when a removal failed: the lease keeps its place (a pending
  removal counts toward the limit) and `tools.jobs.shell_lease_cleanup` retries.
- `shell_lease_settle` is one removal attempt by anyone (the job, the sweep, conversation
  deletion): any process can remove a container through the engine.
- `shell_leases_reconcile` (worker start and beat's sweep) settles leases of gone
  processes, expired and pending ones, and removes containers of this installation that no
  lease explains.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from tools.models import ShellLease, ShellLeaseState
from tools.shell.sandbox import container_name, container_remove, containers_of_scope, sandbox_scope
from tools.slots import SlotHeld, slot_extend, slot_release
from tools.web.leases import PROCESS_HOLDER, holder_alive

logger = logging.getLogger(__name__)

TOOL = "shell"
# A pending lease keeps its place this long past each attempt to remove its container.
PENDING_HOLD = timedelta(minutes=5)
# A lease past its expiry by this much belongs to a call that has ended, whoever held it.
EXPIRY_GRACE = timedelta(seconds=30)


def shell_lease_open(
    *,
    conversation_id: uuid.UUID,
    turn_id: uuid.UUID,
    tool_call_id: str,
    expires_at: datetime,
    place: SlotHeld | None,
) -> uuid.UUID:
    """Record a container this process is about to create; return the lease id."""
    lease = ShellLease.objects.create(
        conversation_id=conversation_id,
        turn_id=turn_id,
        tool_call_id=tool_call_id[:128],
        holder=PROCESS_HOLDER,
        expires_at=expires_at,
        slot=place.slot if place else None,
        slot_holder=place.holder if place else "",
    )
    return lease.id


def shell_lease_wanted(*, lease_id: uuid.UUID) -> bool:
    """Whether a lease's container may still start: its lease exists and nobody asked for removal."""
    return ShellLease.objects.filter(id=lease_id, removal_requested_at__isnull=True).exists()


def _place(lease: ShellLease) -> SlotHeld | None:
    return SlotHeld(TOOL, lease.slot, lease.slot_holder) if lease.slot is not None and lease.slot_holder else None


def shell_lease_removed(*, lease_id: uuid.UUID) -> None:
    """Record that a lease's container is gone: delete the lease and give back its place."""
    with transaction.atomic():
        lease = ShellLease.objects.select_for_update().filter(id=lease_id).first()
        if lease is None:
            return
        place = _place(lease)
        lease.delete()
        if place is not None:
            slot_release(held=place)


def shell_lease_pending(*, lease_id: uuid.UUID) -> None:
    """Count a failed removal: the lease stays, pending, and keeps its place for the retries."""
    with transaction.atomic():
        ShellLease.objects.filter(id=lease_id).update(
            state=ShellLeaseState.PENDING, cleanup_attempts=F("cleanup_attempts") + 1
        )
        lease = ShellLease.objects.filter(id=lease_id).first()
        if lease is not None and (place := _place(lease)) is not None:
            slot_extend(held=place, hold_for=PENDING_HOLD)


def shell_lease_settle(*, lease_id: uuid.UUID) -> bool:
    """Try once to remove a lease's container; True when it is gone (the lease is then deleted)."""
    if not ShellLease.objects.filter(id=lease_id).exists():
        return True
    if container_remove(container_name(lease_id)):
        shell_lease_removed(lease_id=lease_id)
        return True
    shell_lease_pending(lease_id=lease_id)
    return False


def shell_leases_exist(*, conversation_id: uuid.UUID) -> bool:
    return ShellLease.objects.filter(conversation_id=conversation_id).exists()


def shell_leases_request_removal(*, conversation_id: uuid.UUID) -> list[uuid.UUID]:
    """Flag a (deleted) conversation's leases so no container of theirs starts; return their ids."""
    leases = ShellLease.objects.filter(conversation_id=conversation_id)
    leases.filter(removal_requested_at__isnull=True).update(removal_requested_at=timezone.now())
    return list(leases.values_list("id", flat=True))


def shell_leases_due(*, now: datetime | None = None) -> list[uuid.UUID]:
    """Leases whose container nobody else will remove: pending, expired, or of a gone process."""
    now = now or timezone.now()
    due = set(
        ShellLease.objects.filter(Q(state=ShellLeaseState.PENDING) | Q(expires_at__lt=now - EXPIRY_GRACE)).values_list(
            "id", flat=True
        )
    )
    for lease_id, holder in ShellLease.objects.filter(state=ShellLeaseState.OPEN).values_list("id", "holder"):
        if holder != PROCESS_HOLDER and holder_alive(holder) is False:
            due.add(lease_id)
    return sorted(due)


def shell_leases_reconcile() -> int:
    """Remove what no running call owns any more; return how many containers were settled.

    Leases of gone processes, expired and pending ones are settled; then every container
    of this installation's scope whose lease does not exist is removed.
    """
    from docker.errors import DockerException  # the Docker SDK loads on first use
    from requests.exceptions import RequestException  # as does requests, under it

    settled = sum(1 for lease_id in shell_leases_due() if shell_lease_settle(lease_id=lease_id))
    try:
        found = containers_of_scope(sandbox_scope())
    except (DockerException, RequestException):
        logger.info("no Docker engine answers: shell containers are reconciled later")
        return settled
    known = {str(lease_id) for lease_id in ShellLease.objects.values_list("id", flat=True)}
    for name, lease in found:
        if lease not in known and container_remove(name):
            settled += 1
            logger.info("removed shell container %s that no lease explained", name)
    return settled
