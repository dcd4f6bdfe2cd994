"""A separate process that runs one turn on the real engine, to be killed with SIGKILL mid-call.

Run by tests/conversations/test_engine_crash.py with the test run's database, Redis and
loopback providers in the environment. It registers the fixture tools of `crash_tools`
(each call records itself in a file, then works for a minute) and runs the turn whose id
it is given until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from tools.registry import Effect, Tool, ToolContext, tool_register

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def crash_tools(record: Path, *, work_seconds: float) -> list[Tool]:
    """The fixture tools: an `effect` one and a `read` one; every start is a line in `record`."""

    def tool(name: str, effect: Effect) -> Tool:
        async def run(context: ToolContext, data: dict[str, Any]) -> dict[str, Any]:
            with record.open("a") as file:
                file.write(f"{name} {context.tool_call_id}\n")
            await asyncio.sleep(work_seconds)
            return {"done": name, "city": data["city"]}

        return Tool(name, f"The {name} tool.", CITY, run, deadline=120, effect=effect)

    return [tool("send_postcard", Effect.EFFECT), tool("weather_forecast", Effect.READ)]


async def _run(turn_id: uuid.UUID) -> None:
    from conversations.cancel_bus import CancelListener
    from conversations.engine.runner import run_turn

    await run_turn(turn_id, cancels=CancelListener())


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")
    import django

    django.setup()
    for fixture_tool in crash_tools(Path(sys.argv[2]), work_seconds=60):
        tool_register(fixture_tool)
    asyncio.run(_run(uuid.UUID(sys.argv[1])))
