"""Writes of the tools app that other apps call: releasing what tools hold for a conversation."""

from __future__ import annotations

import asyncio
import logging
import uuid

from tools.registry import CleanupRequest, Tool, tools_enabled

logger = logging.getLogger(__name__)

# How long a deleted conversation's teardown waits for each tool's cleanup hook.
DELETION_CLEANUP_TIMEOUT = 30.0


def tools_release_conversation(*, conversation_id: uuid.UUID) -> bool:
    """Run every tool's cleanup hook for a conversation being deleted; return whether all succeeded.

    Synchronous (the teardown job's); the hooks run together, each bounded. A hook that
    failed leaves the conversation to the next teardown attempt, which runs it again:
    hooks are idempotent by contract.
    """
    hooked = [tool for tool in tools_enabled() if tool.cleanup is not None]
    if not hooked:
        return True
    return asyncio.run(_release_all(hooked, conversation_id))


async def _release_all(tools: list[Tool], conversation_id: uuid.UUID) -> bool:
    request = CleanupRequest(conversation_id=conversation_id, turn_id=None, tool_call_id=None, reason="deleted")
    results = await asyncio.gather(*(_release(tool, request) for tool in tools))
    return all(results)


async def _release(tool: Tool, request: CleanupRequest) -> bool:
    assert tool.cleanup is not None
    try:
        await asyncio.wait_for(tool.cleanup(request), DELETION_CLEANUP_TIMEOUT)
    except TimeoutError:
        logger.error("cleanup of tool %s for a deleted conversation timed out; retried later", tool.name)
        return False
    except Exception:
        logger.exception("cleanup of tool %s for a deleted conversation failed; retried later", tool.name)
        return False
    return True
