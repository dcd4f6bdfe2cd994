"""Persisting an answer as it streams: coalesced text, tool parts and their events.

Text deltas are gathered for a short window (the first one goes out at once) and then
written with their event (group-committed with other turns' writes), then published. No per-token database or
Redis round trip; a crash loses at most the last window.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from conversations.engine.batcher import StreamWrite, write_batcher
from conversations.engine.runtime import db
from conversations.eventlog import NewEvent, events_publish
from conversations.models import Turn
from conversations.turns import Claim

WINDOW_SECONDS = 0.04
WINDOW_CHARS = 300


class LeaseLost(Exception):
    """Another attempt owns this turn now (or it was deleted): stop without writing."""


def _record_progress(*, claim: Claim) -> None:
    Turn.objects.filter(id=claim.turn_id, lease_token=claim.lease_token).update(attempts_without_progress=0)


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
        claim = self.claim
        frames = await write_batcher().write(
            StreamWrite(claim.conversation_id, claim.turn_id, claim.lease_token, self.message_id, self.parts, events)
        )
        if frames is None:
            raise LeaseLost
        if not self.progressed:
            self.progressed = True
            await db(_record_progress)(claim=claim)
        await events_publish(conversation_id=claim.conversation_id, frames=frames)

    async def step_done(self, steps: int) -> None:
        await self.flush()
        await db(_record_step)(claim=self.claim, steps=steps)
