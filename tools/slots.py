"""Installation-wide concurrency limits of tools, held in the database.

A tool that declares `concurrency=N` has N places (`ToolSlot` rows 0..N-1 under a unique
constraint). A call takes a free place before it runs and gives it back when its work
has really stopped; the database, not a process-local counter, decides, so the limit holds
across every worker process. A holder that died frees its place when its lease ends.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from flarebot.core.database import db
from tools.models import ToolSlot

# How often a call waiting for a place looks again.
POLL_SECONDS = 0.2


@dataclass(frozen=True)
class SlotHeld:
    tool: str
    slot: int
    holder: str


def slot_acquire(*, tool: str, limit: int, hold_for: timedelta) -> SlotHeld | None:
    """Take a free place of a tool for at most `hold_for`; None when all are taken."""
    now = timezone.now()
    holder = secrets.token_hex(16)
    expires_at = now + hold_for
    for slot in range(limit):
        try:
            with transaction.atomic():
                ToolSlot.objects.create(tool=tool, slot=slot, holder=holder, expires_at=expires_at)
            return SlotHeld(tool, slot, holder)
        except IntegrityError:
            pass
        # Held, or held by a call whose process died: its lease has run out.
        taken = ToolSlot.objects.filter(tool=tool, slot=slot, expires_at__lte=now).update(
            holder=holder, expires_at=expires_at
        )
        if taken:
            return SlotHeld(tool, slot, holder)
    return None


def slot_release(*, held: SlotHeld) -> None:
    """Give a place back (only if this holder still has it)."""
    ToolSlot.objects.filter(tool=held.tool, slot=held.slot, holder=held.holder).delete()


def slot_extend(*, held: SlotHeld, hold_for: timedelta) -> bool:
    """Keep a place for `hold_for` from now (a tool that kept it); False if it is no longer held."""
    until = timezone.now() + hold_for
    return bool(ToolSlot.objects.filter(tool=held.tool, slot=held.slot, holder=held.holder).update(expires_at=until))


async def slot_wait(*, tool: str, limit: int, hold_for: timedelta, wait_at_most: float) -> SlotHeld | None:
    """Wait up to `wait_at_most` seconds for a free place; None if none came free."""
    give_up = time.monotonic() + wait_at_most
    while True:
        held = await db(slot_acquire)(tool=tool, limit=limit, hold_for=hold_for)
        if held is not None or time.monotonic() >= give_up:
            return held
        await asyncio.sleep(min(POLL_SECONDS, max(0.0, give_up - time.monotonic())))
