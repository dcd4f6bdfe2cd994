"""A separate process that runs one browser_read call, to be killed with SIGKILL while it reads.

Run by tests/tools/web/test_browser_crash.py with the test run's database and allowlist in
the environment, and with the socket guard armed. It reads the URL it is given (a page
that never answers) for the conversation it is given, until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

from tests.support import socket_guard


async def _read(conversation_id: uuid.UUID, url: str) -> None:
    from tests.support.tool_context import tool_context
    from tools.web.browser_read import browser_read

    await browser_read(tool_context(conversation_id=conversation_id), {"url": url})


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flarebot.settings")
    import django

    django.setup()
    socket_guard.arm()
    asyncio.run(_read(uuid.UUID(sys.argv[1]), sys.argv[2]))
