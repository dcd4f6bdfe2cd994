"""Persisting an answer as it streams: coalesced text, tool parts and their events.

Text deltas are gathered for a short window (the first one goes out at once) and then
written with their event (group-committed with other turns' writes), then published. No per-token database or
Redis round trip; a crash loses at most the last window.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

from conversations.engine.batcher import write_batcher
from conversations.engine.writes import StreamWrite
from conversations.errors import LeaseLost
from conversations.eventlog import events_publish
from conversations.events import NewEvent, text_delta
from conversations.turns import Claim, turn_progress_record, turn_step_record
from flarebot.core.database import db
from flarebot.core.text import json_text_safe
from tools.activity import Activity

WINDOW_SECONDS = 0.04
WINDOW_CHARS = 300


@dataclass
class TranscriptWriter:
    """Buffers text and writes it in the background, one write in flight per turn.

    Reading the model's stream never waits for the database: text that arrives while a
    write is in flight joins the next delta, so a slower database makes deltas larger,
    not streams slower. The first text goes out at once; later text at most every
    WINDOW_SECONDS or when WINDOW_CHARS have gathered.
    """

    claim: Claim
    message_id: uuid.UUID
    parts: list[dict[str, Any]]
    pending: list[tuple[int, str]] = field(default_factory=list)
    last_flush: float = 0.0
    sent_any: bool = False
    progressed: bool = False
    _flusher: asyncio.Task[None] | None = None
    _urgent: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    announced: asyncio.Future[None] | None = None  # publishing turn.started; ours go after it
    # Whether the turn may have counted attempts without progress, which the first output
    # resets (a first attempt that never stalled has none: no write needed).
    reset_stalls: bool = True

    def _pending_chars(self) -> int:
        return sum(len(text) for _, text in self.pending)

    def _due_in(self) -> float:
        if self._urgent or not self.sent_any or self._pending_chars() >= WINDOW_CHARS:
            return 0.0
        return max(0.0, self.last_flush + WINDOW_SECONDS - time.monotonic())

    async def add_text(self, step: int, text: str) -> None:
        """Buffer text of a step; a background write takes it out when due."""
        self._raise_if_failed()
        if self.pending and self.pending[-1][0] == step:
            self.pending[-1] = (step, self.pending[-1][1] + text)
        else:
            self.pending.append((step, text))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_when_due())

    async def _flush_when_due(self) -> None:
        while self.pending:
            delay = self._due_in()
            if delay > 0:
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=delay)
                self._wake.clear()
            await self._write_pending()

    def _raise_if_failed(self) -> None:
        if self._flusher is not None and self._flusher.done() and not self._flusher.cancelled():
            error = self._flusher.exception()
            if error is not None:
                self._flusher = None
                raise error

    async def flush(self) -> None:
        """Write everything buffered now and wait until it is written and published."""
        self._urgent = True
        try:
            if self._flusher is not None and not self._flusher.done():
                self._wake.set()
                await asyncio.wait({self._flusher})  # it writes what is pending, one write at a time
            self._raise_if_failed()
            self._flusher = None
            await self._write_pending()
        finally:
            self._urgent = False

    async def _write_pending(self) -> None:
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        for step, text in pending:
            last = self.parts[-1] if self.parts else None
            if last is not None and last["type"] == "text" and last.get("step") == step:
                last["text"] += text
            else:
                self.parts.append({"type": "text", "text": text, "step": step})
        turn_id, message_id = self.claim.turn_id, self.message_id
        await self._write([text_delta(turn_id, message_id=message_id, text=text) for _, text in pending])
        self.sent_any = True

    async def record(self, events: list[NewEvent], activities: tuple[Activity, ...] = ()) -> None:
        """Write the current parts with events other than text (tool calls and their activity)."""
        await self.flush()
        # Copies: the executor thread stores them while this loop goes on changing the originals.
        await self._write(events, tuple(replace(activity) for activity in activities))

    async def _write(self, events: list[NewEvent], activities: tuple[Activity, ...] = ()) -> None:
        self.last_flush = time.monotonic()
        claim = self.claim
        # Copies, which the executor thread serializes while this loop goes on, and the one
        # place where what the model or a tool produced becomes stored JSON: PostgreSQL
        # refuses NUL characters there, so they become U+FFFD.
        parts = json_text_safe(self.parts)
        events = [(kind, turn_id, json_text_safe(data)) for kind, turn_id, data in events]
        write = StreamWrite(
            claim.conversation_id, claim.turn_id, claim.lease_token, self.message_id, parts, events, activities
        )
        frames = await write_batcher().write(write)
        if frames is None:
            raise LeaseLost
        if self.announced is not None:
            await self.announced
        await events_publish(conversation_id=claim.conversation_id, frames=frames)
        if not self.progressed:
            self.progressed = True
            # After the output is out: a crash in between counts one attempt too many.
            if self.reset_stalls:
                await db(turn_progress_record)(claim=claim)

    async def step_done(self, steps: int) -> None:
        await self.flush()
        await db(turn_step_record)(claim=self.claim, steps=steps)

    async def close(self) -> None:
        """Stop the background writer without writing (the attempt is over)."""
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._flusher
