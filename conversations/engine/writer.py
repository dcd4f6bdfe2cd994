"""Persisting an answer as it streams: coalesced text, tool parts and their events.

Text deltas are gathered for a short window (the first one goes out at once) and then
written in one transaction with their event, then published. No per-token database or
Redis round trip; a crash loses at most the last window.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from conversations.engine.runtime import db
from conversations.eventlog import EventFrame, NewEvent, events_append, events_publish
from conversations.models import Message, Turn, TurnStatus
from conversations.turns import LEASE, Claim

WINDOW_SECONDS = 0.04
WINDOW_CHARS = 300


class LeaseLost(Exception):
    """Another attempt owns this turn now (or it was deleted): stop without writing."""


def _persist(
    *, claim: Claim, message_id: uuid.UUID, parts: list[dict[str, Any]], events: list[NewEvent], progress: bool
) -> list[EventFrame] | None:
    with transaction.atomic():
        updates: dict[str, Any] = {"lease_expires_at": timezone.now() + LEASE}
        if progress:
            updates["attempts_without_progress"] = 0
        owned = Turn.objects.filter(id=claim.turn_id, lease_token=claim.lease_token, status=TurnStatus.RUNNING).update(
            **updates
        )
        if not owned:
            return None
        Message.objects.filter(id=message_id).update(parts=parts)
        return events_append(conversation_id=claim.conversation_id, events=events)


def _record_step(*, claim: Claim, steps: int) -> None:
    Turn.objects.filter(id=claim.turn_id, lease_token=claim.lease_token).update(steps=steps)


@dataclass
class TranscriptWriter:
    claim: Claim
    message_id: uuid.UUID
    parts: list[dict[str, Any]]
    pending: str = ""
    pending_step: int = 0
    last_flush: float = 0.0
    sent_any: bool = False
    progressed: bool = False

    def text_due_in(self) -> float | None:
        """Seconds until buffered text must go out, or None when nothing is buffered."""
        if not self.pending:
            return None
        return max(0.0, self.last_flush + WINDOW_SECONDS - time.monotonic())

    async def add_text(self, step: int, text: str) -> None:
        if self.pending and step != self.pending_step:
            await self.flush()
        self.pending += text
        self.pending_step = step
        if not self.sent_any or len(self.pending) >= WINDOW_CHARS or self.text_due_in() == 0.0:
            await self.flush()

    async def flush(self) -> None:
        """Write and publish the buffered text, if any."""
        if not self.pending:
            return
        text, step = self.pending, self.pending_step
        self.pending = ""
        last = self.parts[-1] if self.parts else None
        if last is not None and last["type"] == "text" and last.get("step") == step:
            last["text"] += text
        else:
            self.parts.append({"type": "text", "text": text, "step": step})
        await self._write([("text.delta", self.claim.turn_id, {"text": text, "message_id": str(self.message_id)})])
        self.sent_any = True

    async def record(self, events: list[NewEvent]) -> None:
        """Write the current parts with events other than text (tool activity)."""
        await self.flush()
        await self._write(events)

    async def _write(self, events: list[NewEvent]) -> None:
        self.last_flush = time.monotonic()
        frames = await db(_persist)(
            claim=self.claim, message_id=self.message_id, parts=self.parts, events=events, progress=not self.progressed
        )
        if frames is None:
            raise LeaseLost
        self.progressed = True
        await events_publish(conversation_id=self.claim.conversation_id, frames=frames)

    async def step_done(self, steps: int) -> None:
        await self.flush()
        await db(_record_step)(claim=self.claim, steps=steps)
