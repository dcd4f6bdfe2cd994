"""Running one claimed turn: model steps, tool calls, cancellation, stalls and recovery.

The loop streams a model step, persists its text as it arrives, runs the tool calls the
step asked for, and feeds their results to the next step, for at most 8 steps (the last
one without tools, so it must answer). Each attempt reads the current settings and
instructions once and keeps them for all its steps.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from conversations.cancel_bus import CancelListener
from conversations.engine.finishes import turn_end
from conversations.engine.preparation import Prepared, attempt_restart
from conversations.engine.starts import turn_start
from conversations.engine.tool_calls import TurnTools, rerun_tool_calls, run_tool_calls
from conversations.engine.writer import TranscriptWriter
from conversations.errors import LeaseLost
from conversations.eventlog import events_publish
from conversations.models import TurnStatus
from conversations.providers.base import ModelRequest, StepFinished, StreamEvent, TextDelta, ToolCall, ToolDefinition
from conversations.providers.catalog import adapter_loaded
from conversations.providers.errors import ProviderError
from conversations.turns import (
    LEASE_RENEW_SECONDS,
    Claim,
    Finish,
    turn_cancel_requested,
    turn_lease_renew,
)
from flarebot.core.database import db
from tools.registry import tools_enabled
from tools.runtime import CallWatch

logger = logging.getLogger(__name__)

MAX_STEPS = 8


@dataclass(frozen=True)
class Outcome:
    status: str  # completed | cancelled | failed | stalled
    code: str = ""
    message: str = ""


STALLED_MESSAGE = "The model stopped responding. Try again in a moment."


async def run_turn(turn_id: uuid.UUID, *, cancels: CancelListener) -> None:
    """Claim a turn and run it to the end, unless another attempt owns it or it must wait."""
    started = await turn_start(turn_id)
    if started is None:
        return
    claim, prepared = started
    # turn.started goes out while the model call starts; later events wait for it, so
    # clients still see them in order.
    announced = asyncio.ensure_future(events_publish(conversation_id=claim.conversation_id, frames=claim.frames))
    cancelled = await cancels.watch(turn_id)
    watch = CallWatch()
    heartbeat = asyncio.get_running_loop().create_task(_heartbeat(claim, watch))
    try:
        await _run_claimed(claim, cancelled, prepared, announced, watch)
    except LeaseLost:
        logger.info("turn %s: lease lost, another attempt owns it", turn_id)
    finally:
        heartbeat.cancel()
        cancels.forget(turn_id)


async def _heartbeat(claim: Claim, watch: CallWatch) -> None:
    """Renew the turn's lease while it runs (every attempt of this claim keeps its token).

    Not for a tool call past its deadline plus grace: the engine should have given up on
    it, so something is stuck, and the lease is left to expire for recovery to take over.
    """
    while True:
        await asyncio.sleep(LEASE_RENEW_SECONDS)
        if watch.overdue():
            logger.error("turn %s: a tool call outlived its deadline and grace; lease not renewed", claim.turn_id)
            return
        if not await db(turn_lease_renew)(turn_id=claim.turn_id, lease_token=claim.lease_token):
            return


async def _run_claimed(
    claim: Claim, cancelled: asyncio.Event, prepared: Prepared, announced: asyncio.Future[None], watch: CallWatch
) -> None:
    may_have_stalls = claim.attempt > 1  # attempts without progress counted, for the first output to reset
    while True:
        if prepared.frames:
            await announced
            await events_publish(conversation_id=claim.conversation_id, frames=prepared.frames)
        if prepared.cancel_requested:
            cancelled.set()
        if cancelled.is_set():
            outcome = Outcome(TurnStatus.CANCELLED)
        elif prepared.model.problem is not None:
            outcome = Outcome(TurnStatus.FAILED, *prepared.model.problem)
        else:
            writer = TranscriptWriter(
                claim, prepared.assistant_message_id, prepared.parts, announced=announced, reset_stalls=may_have_stalls
            )
            try:
                outcome = await _attempt(claim, prepared, writer, cancelled, TurnTools(watch=watch))
            finally:
                await writer.close()
            if outcome.status == "stalled":
                may_have_stalls = True
                restarted = await db(attempt_restart)(claim)
                if restarted is not None:
                    logger.info("turn %s: attempt stalled (%s); trying again", claim.turn_id, outcome.code)
                    claim, prepared = restarted
                    await events_publish(conversation_id=claim.conversation_id, frames=claim.frames)
                    continue
                if await db(turn_cancel_requested)(turn_id=claim.turn_id):
                    outcome = Outcome(TurnStatus.CANCELLED)
                else:
                    outcome = Outcome(
                        TurnStatus.FAILED, outcome.code or "model_stalled", outcome.message or STALLED_MESSAGE
                    )
        await announced
        await turn_end(Finish(claim.turn_id, claim.lease_token, outcome.status, outcome.code, outcome.message))
        return


async def _attempt(
    claim: Claim, prepared: Prepared, writer: TranscriptWriter, cancelled: asyncio.Event, turn_tools: TurnTools
) -> Outcome:
    adapter = await adapter_loaded(prepared.model.provider)
    steps = prepared.steps
    system = prepared.system
    if prepared.rerun:
        await rerun_tool_calls(claim, writer, prepared.rerun, cancelled, turn_tools)
        if cancelled.is_set():
            return Outcome(TurnStatus.CANCELLED)
    while steps < MAX_STEPS:
        offered = tools_enabled()
        may_call = steps < MAX_STEPS - 1
        transcript = prepared.transcript + ([{"role": "assistant", "parts": writer.parts}] if writer.parts else [])
        request = ModelRequest(
            system=system,
            transcript=transcript,
            tools=[ToolDefinition(t.name, t.description, t.input_schema) for t in offered],
            may_call_tools=may_call,
        )
        stream = adapter.stream(request, model=prepared.model.model, key=prepared.model.key)
        calls: list[ToolCall] = []
        try:
            outcome = await _consume(stream, writer, steps, calls, cancelled)
        except ProviderError as error:
            await writer.flush()
            return Outcome("stalled" if error.retryable else TurnStatus.FAILED, error.code, error.message)
        if outcome is not None:
            return outcome
        steps += 1
        await writer.step_done(steps)
        if not calls:
            return Outcome(TurnStatus.COMPLETED)
        callable_names = {t.name for t in offered} if may_call else set()
        await run_tool_calls(claim, writer, steps - 1, calls, callable_names, cancelled, turn_tools)
        # The flag in the database is the truth: a cancel whose announcement on Redis was
        # lost still stops the turn here, before the next model step.
        if cancelled.is_set() or await db(turn_cancel_requested)(turn_id=claim.turn_id):
            return Outcome(TurnStatus.CANCELLED)
    return Outcome(TurnStatus.COMPLETED)


async def _consume(
    stream: AsyncIterator[StreamEvent],
    writer: TranscriptWriter,
    step: int,
    calls: list[ToolCall],
    cancelled: asyncio.Event,
) -> Outcome | None:
    """Read one model step; return an outcome when the attempt ends here, None to go on."""
    idle_limit = settings.CONFIG.stream_idle_timeout
    last_activity = time.monotonic()
    cancel_wait = asyncio.ensure_future(cancelled.wait())
    next_event: asyncio.Future[StreamEvent] | None = None
    try:
        while True:
            if next_event is None:
                next_event = asyncio.ensure_future(anext(stream))
            timeout = max(0.0, idle_limit - (time.monotonic() - last_activity))
            waiting: set[asyncio.Future[Any]] = {next_event, cancel_wait}
            done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if cancel_wait in done:
                await writer.flush()
                return Outcome(TurnStatus.CANCELLED)
            if next_event in done:
                try:
                    event = next_event.result()
                except StopAsyncIteration:
                    return None
                finally:
                    next_event = None
                last_activity = time.monotonic()
                await _handle(event, writer, step, calls)
                continue
            if time.monotonic() - last_activity >= idle_limit:
                await writer.flush()
                return Outcome("stalled", "model_stalled", STALLED_MESSAGE)
    finally:
        cancel_wait.cancel()
        if next_event is not None:
            next_event.cancel()
            with suppress(BaseException):
                await next_event
        with suppress(Exception):
            await stream.aclose()  # type: ignore[attr-defined]


async def _handle(event: StreamEvent, writer: TranscriptWriter, step: int, calls: list[ToolCall]) -> None:
    if isinstance(event, TextDelta):
        await writer.add_text(step, event.text)
    elif isinstance(event, ToolCall):
        calls.append(event)
    elif isinstance(event, StepFinished):
        await writer.flush()
