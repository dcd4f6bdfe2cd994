"""Browser leases: the durable record of every browser context, from before it opens to its close.

A browser context lives in one worker process, so only that process can close it; the
lease row is how every other party asks and learns. The services here are the only writes:

- `browser_lease_open` before the context opens; `browser_lease_closed` once closure is
  confirmed (or the context's browser died with its process).
- `browser_leases_request_close` (conversation deletion, the cleanup job) flags leases;
  the holder's watcher (`browser_leases_close_requested`) closes what is flagged.
- `browser_lease_extend` moves a browser task's expiry; `browser_lease_wake_request` asks
  the holder of a paused task's kept context to resume it there (the watcher again).
- `browser_lease_cleanup_attempt` counts a failed cleanup; the third leaves the lease
  `cleanup_failed`, unresolved, and nobody retries it again.
- `browser_leases_reconcile` (worker start, the sweep) closes the leases of processes of
  this host that are gone, killing a browser of theirs that somehow survived.

A process is named by host, pid and start time (`PROCESS_HOLDER`), so a reused pid is
never mistaken for the process that held a lease.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from tools.models import BrowserLease, BrowserLeaseState

logger = logging.getLogger(__name__)

CLEANUP_ATTEMPTS = 3
# The argument every browser of a process carries, so a survivor can be found after a crash.
BROWSER_MARK = "--flarebot-browser="


def _start_time(pid: int) -> str | None:
    """The start time of a process (Linux clock ticks since boot), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _this_process() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid) or int(time.time())}"


PROCESS_HOLDER = _this_process()


def holder_alive(holder: str) -> bool | None:
    """Whether a lease's holder process still runs: None when it runs on another host."""
    host, pid_text, started = holder.rsplit(":", 2)
    if host != socket.gethostname():
        return None
    try:
        pid = int(pid_text)
    except ValueError:
        return False
    return _start_time(pid) == started


def browser_lease_open(
    *, conversation_id: uuid.UUID, turn_id: uuid.UUID, tool_call_id: str, expires_at: datetime
) -> uuid.UUID:
    """Record a context this process is about to open; return the lease id."""
    lease = BrowserLease.objects.create(
        conversation_id=conversation_id,
        turn_id=turn_id,
        tool_call_id=tool_call_id[:128],
        holder=PROCESS_HOLDER,
        expires_at=expires_at,
    )
    return lease.id


def browser_lease_closed(*, lease_id: uuid.UUID) -> None:
    """Record that a lease's context is closed (also after its cleanup had failed)."""
    BrowserLease.objects.filter(id=lease_id).exclude(state=BrowserLeaseState.CLOSED).update(
        state=BrowserLeaseState.CLOSED, closed_at=timezone.now()
    )


def browser_lease_state(*, lease_id: uuid.UUID) -> str | None:
    return BrowserLease.objects.filter(id=lease_id).values_list("state", flat=True).first()


def browser_lease_close_wanted(*, lease_id: uuid.UUID) -> bool:
    """Whether someone asked for this lease's context to close (its conversation is being deleted)."""
    return BrowserLease.objects.filter(id=lease_id, close_requested_at__isnull=False).exists()


def browser_leases_request_close(*, conversation_id: uuid.UUID | None = None, lease_id: uuid.UUID | None = None) -> int:
    """Ask the holders to close a conversation's (or one) open leases; return how many are open."""
    leases = BrowserLease.objects.filter(state=BrowserLeaseState.OPEN)
    if conversation_id is not None:
        leases = leases.filter(conversation_id=conversation_id)
    if lease_id is not None:
        leases = leases.filter(id=lease_id)
    leases.filter(close_requested_at__isnull=True).update(close_requested_at=timezone.now())
    return leases.count()


def browser_leases_open_count(*, conversation_id: uuid.UUID) -> int:
    return BrowserLease.objects.filter(conversation_id=conversation_id, state=BrowserLeaseState.OPEN).count()


def browser_leases_close_requested(*, lease_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """Return which of this process's open leases someone asked to close."""
    return list(
        BrowserLease.objects.filter(
            id__in=lease_ids, holder=PROCESS_HOLDER, state=BrowserLeaseState.OPEN, close_requested_at__isnull=False
        ).values_list("id", flat=True)
    )


def browser_lease_extend(*, lease_id: uuid.UUID, expires_at: datetime) -> bool:
    """Move an open lease's expiry (a browser task's); False when it is no longer open."""
    return BrowserLease.objects.filter(id=lease_id, state=BrowserLeaseState.OPEN).update(expires_at=expires_at) == 1


def browser_lease_wake_request(*, lease_id: uuid.UUID) -> bool:
    """Ask the holder of an open lease to wake what it keeps there; False when it is not open."""
    return (
        BrowserLease.objects.filter(id=lease_id, state=BrowserLeaseState.OPEN).update(wake_requested_at=timezone.now())
        == 1
    )


def browser_leases_wake_take(*, lease_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """Return which of this process's open leases someone asked to wake, clearing the requests."""
    with transaction.atomic():
        woken = list(
            BrowserLease.objects.select_for_update()
            .filter(
                id__in=lease_ids,
                holder=PROCESS_HOLDER,
                state=BrowserLeaseState.OPEN,
                wake_requested_at__isnull=False,
                close_requested_at__isnull=True,
            )
            .values_list("id", flat=True)
        )
        if woken:
            BrowserLease.objects.filter(id__in=woken).update(wake_requested_at=None)
    return woken


def browser_lease_holder(*, lease_id: uuid.UUID) -> tuple[str, str] | None:
    """Return an existing lease's (state, holder), or None."""
    row = BrowserLease.objects.filter(id=lease_id).values_list("state", "holder").first()
    return (row[0], row[1]) if row is not None else None


def browser_lease_cleanup_attempt(*, lease_id: uuid.UUID) -> str | None:
    """Count one failed cleanup of an open lease; return its state afterwards (None if unknown)."""
    with transaction.atomic():
        BrowserLease.objects.filter(id=lease_id, state=BrowserLeaseState.OPEN).update(
            cleanup_attempts=F("cleanup_attempts") + 1
        )
        BrowserLease.objects.filter(
            id=lease_id, state=BrowserLeaseState.OPEN, cleanup_attempts__gte=CLEANUP_ATTEMPTS
        ).update(state=BrowserLeaseState.CLEANUP_FAILED)
        return browser_lease_state(lease_id=lease_id)


def browser_leases_reconcile() -> int:
    """Close the open leases of this host's processes that are gone; return how many.

    Their browsers died with them (Playwright's driver ends its browsers when its parent
    goes); one that survived anyway is found by its mark and killed first.
    """
    closed = 0
    host = socket.gethostname()
    holders = (
        BrowserLease.objects.filter(state=BrowserLeaseState.OPEN, holder__startswith=f"{host}:")
        .values_list("holder", flat=True)
        .distinct()
    )
    for holder in list(holders):
        if holder == PROCESS_HOLDER or holder_alive(holder) is not False:
            continue
        browsers_of_holder_kill(holder)
        closed += BrowserLease.objects.filter(holder=holder, state=BrowserLeaseState.OPEN).update(
            state=BrowserLeaseState.CLOSED, closed_at=timezone.now()
        )
    if closed:
        logger.info("closed %d browser leases of worker processes that are gone", closed)
    return closed


def browsers_of_holder_kill(holder: str) -> int:
    """Kill the browsers a (gone) process of this host started; return how many were found."""
    mark = f"{BROWSER_MARK}{holder_token(holder)}".encode()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark in arguments:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def holder_token(holder: str) -> str:
    """The holder in a form fit for a command-line argument."""
    return "".join(ch if ch.isalnum() else "-" for ch in holder)


def browser_leases_expired(*, now: datetime | None = None, grace: timedelta = timedelta(seconds=30)) -> list[uuid.UUID]:
    """Open leases past their expiry (plus a grace), for the sweep."""
    cutoff = (now or timezone.now()) - grace
    return list(
        BrowserLease.objects.filter(state=BrowserLeaseState.OPEN, expires_at__lt=cutoff).values_list("id", flat=True)
    )


def browser_lease_cleanup_run(*, lease_id: uuid.UUID, wait: float = 5.0) -> str | None:
    """One cleanup attempt of a lease: ask its holder, wait up to `wait` s; return its state after.

    `open` afterwards means this attempt failed and another may follow; `cleanup_failed`
    means the attempts are exhausted.
    """
    if browser_lease_state(lease_id=lease_id) != BrowserLeaseState.OPEN:
        return browser_lease_state(lease_id=lease_id)
    browser_leases_request_close(lease_id=lease_id)
    give_up = time.monotonic() + wait
    while time.monotonic() < give_up:
        browser_leases_reconcile()
        state = browser_lease_state(lease_id=lease_id)
        if state != BrowserLeaseState.OPEN:
            return state
        time.sleep(0.25)
    return browser_lease_cleanup_attempt(lease_id=lease_id)
