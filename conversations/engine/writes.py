"""One streamed window as the database receives it: what the writer hands the batcher.

The writer (`writer.py`) makes a `StreamWrite` per window; the batcher (`batcher.py`)
stores it in a group commit, on PostgreSQL through the engine loop's own connection
(`stream_store.py`). Its own module, so that neither of the two that store it imports the
other for it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from conversations.events import NewEvent
from tools.activity import Activity


@dataclass(frozen=True)
class StreamWrite:
    conversation_id: uuid.UUID
    turn_id: uuid.UUID
    lease_token: str
    message_id: uuid.UUID
    parts: list[dict[str, Any]]
    events: list[NewEvent]
    activities: tuple[Activity, ...] = ()  # tool activity stored with the events announcing it
