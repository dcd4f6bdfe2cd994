"""What a shell call hands the sandbox from the conversation, and what it keeps of what came back.

In: every attachment of the conversation's sent messages (the owner's uploads and files
earlier commands returned), whatever branch shows them, newest first within
`IN_BYTES_MAX` (those left out are named in the result), named in the order they were
sent. Back: each file of
`/workspace/out/` the sandbox returned is stored as an attachment of the turn's answer
(`attachments.tool_files.attachment_from_tool`); a refused type is skipped and said.
The result lists what came back under `attachments` (parts of the answer's shape, which
the engine appends to the answer) and the rest under `files_not_returned`.
"""

from __future__ import annotations

import uuid
from typing import Any

from attachments.errors import AttachmentTooLarge, UnsupportedType
from attachments.services import attachment_part
from attachments.tool_files import attachment_blob, attachment_from_tool, attachments_for_sandbox
from flarebot.core.database import db
from tools.registry import ToolContext
from tools.shell.files import IN_BYTES_MAX, Returned, SandboxInput, sandbox_name, sandbox_names


def _inputs(conversation_id: uuid.UUID) -> tuple[list[SandboxInput], list[str]]:
    kept, left = attachments_for_sandbox(conversation_id=conversation_id, bytes_max=IN_BYTES_MAX)
    kept.reverse()  # named in the order they were sent: a later file of the same name gets " (2)"
    names = sandbox_names([a.name for a in kept])
    inputs = [SandboxInput(n, attachment_blob(a), a.size) for n, a in zip(names, kept, strict=True)]
    bound = f"the attachments copied may be {IN_BYTES_MAX // (1024 * 1024)} MB in all"
    notes = [f"{sandbox_name(a.name)}: not copied in, {bound}." for a in left]
    return inputs, notes


async def sandbox_inputs(conversation_id: uuid.UUID) -> tuple[list[SandboxInput], list[str]]:
    """Return the attachments to copy into the call's sandbox, and notes on those left out."""
    return await db(_inputs)(conversation_id)


async def returned_store(context: ToolContext, returned: Returned) -> dict[str, Any]:
    """Store the files that came back; return the result's `attachments` and `files_not_returned`."""
    parts: list[dict[str, Any]] = []
    notes = list(returned.notes)
    for name, data in returned.files:
        try:
            attachment = await db(attachment_from_tool)(
                conversation_id=context.conversation_id,
                turn_id=context.turn_id,
                tool_call_id=context.tool_call_id,
                name=name,
                data=data,
            )
        except (UnsupportedType, AttachmentTooLarge) as refused:
            notes.append(f"{sandbox_name(name)}: not returned, {refused.message.rstrip('.').lower()}.")
            continue
        parts.append(dict(attachment_part(attachment)))
    found: dict[str, Any] = {}
    if parts:
        found["attachments"] = parts
    if notes:
        found["files_not_returned"] = notes
    return found
