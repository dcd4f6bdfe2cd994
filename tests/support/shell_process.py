"""A separate process that runs shell calls through the tool runtime, as a worker would.

Run by tests/tools/shell with the test run's database in the environment: it starts
`calls` calls of `command` at once for the conversation it is given (each taking a place
under the shell's installation-wide limit), and prints one JSON line per call with its
status and output. Tests kill it with SIGKILL mid-command, or let it finish.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid


async def _call(conversation_id: uuid.UUID, command: str) -> dict:
    from tests.support.tool_context import tool_context
    from tools.runtime import Availability, CallWatch, tool_call_execute
    from tools.shell.tool import SHELL

    async def running() -> None:
        return None

    context = tool_context(conversation_id=conversation_id, tool_call_id=f"call-{uuid.uuid4().hex[:8]}")
    result = await tool_call_execute(
        SHELL, context, {"command": command}, availability=Availability(), watch=CallWatch(), on_running=running
    )
    return {"status": result.status, "output": result.output}


async def _main(conversation_id: uuid.UUID, calls: int, command: str) -> None:
    results = await asyncio.gather(*(_call(conversation_id, command) for _ in range(calls)))
    for result in results:
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")
    import django

    django.setup()
    asyncio.run(_main(uuid.UUID(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
