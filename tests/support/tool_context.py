"""A ToolContext for calling a tool's `run` directly, outside a turn."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from flarebot.core.crypto import Secret
from tools.registry import KeyMissing, ToolContext


def tool_context(
    *,
    keys: dict[str, str] | None = None,
    conversation_id: uuid.UUID | None = None,
    turn_id: uuid.UUID | None = None,
    tool_call_id: str = "call-1",
    live: Callable[[], bool] = lambda: True,
    untrusted: Callable[[], bool] = lambda: False,
    progress: list[dict[str, Any]] | None = None,
    hints: list[str] | None = None,
) -> ToolContext:
    stored = dict(keys or {})
    reports = progress if progress is not None else []

    async def provider_key(provider: str) -> Secret | KeyMissing:
        key = stored.get(provider)
        return Secret(key) if key is not None else KeyMissing("missing", "Add a key in Settings.")

    async def report(update: dict[str, Any]) -> None:
        reports.append(update)

    report_progress: Callable[[dict[str, Any]], Awaitable[None]] = report
    return ToolContext(
        conversation_id=conversation_id or uuid.uuid4(),
        turn_id=turn_id or uuid.uuid4(),
        tool_call_id=tool_call_id,
        cancelled=asyncio.Event(),
        report_progress=report_progress,
        provider_key=provider_key,
        conversation_live=live,
        untrusted_read=untrusted,
        hint_owner=(hints if hints is not None else []).append,
    )
