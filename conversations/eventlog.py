"""The conversation event log: append with the next gap-free sequence, publish, replay.

Appending happens inside the writer's transaction: bumping `Conversation.last_sequence`
locks the conversation row until commit, so sequences are allocated and committed in
order. Frames are published to the conversation's group only after commit; a socket that
sees a jump in sequence reads the missing events back from the database.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any, Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from conversations.events import EventKind, NewEvent, OwnerChanged, conversation_group, event_moves_attention
from conversations.models import UNREAD_EVENT_KINDS, Conversation, Event
from conversations.publisher import group_publish
from conversations.signals import events_stored
from conversations.sql import sequences_allocate
from flarebot.core.rows import rows_insert
from flarebot.core.sessions import OWNER_SOCKETS_GROUP

logger = logging.getLogger(__name__)

PAGE_SIZE = 500


class EventFrame(TypedDict):
    type: Literal["event"]
    sequence: int
    event: str
    turn_id: str | None
    data: dict[str, Any]


class EventsPublished(TypedDict):
    """Sent to a conversation's group: frames in sequence order."""

    type: Literal["events.published"]
    frames: list[EventFrame]


def event_frame(event: Event) -> EventFrame:
    return event_frame_of(sequence=event.sequence, kind=event.kind, turn_id=event.turn_id, data=event.data)


def events_append(*, conversation_id: uuid.UUID, events: Sequence[NewEvent]) -> list[EventFrame]:
    """Append events in the caller's transaction and return their frames (not yet published)."""
    if not events:
        return []
    first = sequences_allocate(conversation_id=conversation_id, count=len(events))
    return events_insert([(conversation_id, first, events)])


def events_insert(numbered: Sequence[tuple[uuid.UUID, int, Sequence[NewEvent]]]) -> list[EventFrame]:
    """Store events whose sequences were allocated, in one statement; return their frames.

    `numbered` holds (conversation, first sequence, events) per conversation.
    """
    rows: list[dict[str, Any]] = [
        {"conversation_id": conversation_id, "sequence": first + i, "kind": kind, "turn_id": turn_id, "data": data}
        for conversation_id, first, events in numbered
        for i, (kind, turn_id, data) in enumerate(events)
    ]
    rows_insert(Event, rows)
    if events_stored.has_listeners():
        events_stored.send(sender=Event, rows=rows)
    return [
        event_frame_of(sequence=row["sequence"], kind=row["kind"], turn_id=row["turn_id"], data=row["data"])
        for row in rows
    ]


def event_frame_of(*, sequence: int, kind: str, turn_id: uuid.UUID | None, data: dict[str, Any]) -> EventFrame:
    """The frame of an event stored with these values."""
    return EventFrame(type="event", sequence=sequence, event=kind, turn_id=str(turn_id) if turn_id else None, data=data)


def published(frames: list[EventFrame]) -> EventsPublished:
    return EventsPublished(type="events.published", frames=frames)


def owner_changed_of(*, conversation_id: uuid.UUID, frames: list[EventFrame]) -> OwnerChanged | None:
    """The owner-wide notice these frames call for: an unread count, the list's order or the
    needs-you list moved; else None."""
    unread = any(frame["event"] in UNREAD_EVENT_KINDS for frame in frames)
    attention = any(event_moves_attention(frame["event"], frame["data"]) for frame in frames)
    # A new message (its turn queued) moved the conversation to the top and may have named it.
    listed = any(frame["event"] == EventKind.TURN_QUEUED for frame in frames)
    if not unread and not attention and not listed:
        return None
    notice = OwnerChanged(type="owner.changed", conversation_id=str(conversation_id), attention=attention)
    if listed:
        notice["listed"] = True
    return notice


def owner_changed_send(*, conversation_id: uuid.UUID | None, attention: bool = False, listed: bool = False) -> None:
    """Tell every socket of the owner that an unread count, a conversation's name or place, or the
    needs-you list moved; never raises."""
    notice = OwnerChanged(
        type="owner.changed", conversation_id=str(conversation_id) if conversation_id else None, attention=attention
    )
    if listed:
        notice["listed"] = True
    try:
        async_to_sync(get_channel_layer().group_send)(OWNER_SOCKETS_GROUP, dict(notice))
    except Exception:
        # Pages read the list again when they are shown again.
        logger.warning("could not publish an owner notice", exc_info=True)


def events_publish_sync(*, conversation_id: uuid.UUID, frames: list[EventFrame]) -> None:
    """Publish committed frames from synchronous code (views, jobs); never raises."""
    if not frames:
        return
    try:
        layer = get_channel_layer()
        async_to_sync(layer.group_send)(conversation_group(conversation_id), published(frames))
        notice = owner_changed_of(conversation_id=conversation_id, frames=frames)
        if notice is not None:
            async_to_sync(layer.group_send)(OWNER_SOCKETS_GROUP, dict(notice))
    except Exception:
        # The events are durable; sockets catch up from the database on their next frame
        # or reconnect.
        logger.warning("could not publish events of conversation %s", conversation_id, exc_info=True)


def events_publish_after_commit(*, conversation_id: uuid.UUID, frames: list[EventFrame]) -> None:
    """Publish frames appended in the caller's transaction once it commits (at once outside one); never raises."""
    if frames:
        transaction.on_commit(lambda: events_publish_sync(conversation_id=conversation_id, frames=frames))


def events_append_published(*, conversation_id: uuid.UUID, events: Sequence[NewEvent]) -> list[EventFrame]:
    """Append events in the caller's transaction and publish their frames once it commits."""
    frames = events_append(conversation_id=conversation_id, events=events)
    events_publish_after_commit(conversation_id=conversation_id, frames=frames)
    return frames


async def events_publish(*, conversation_id: uuid.UUID, frames: list[EventFrame]) -> None:
    """Publish committed frames from the engine's event loop; never raises."""
    if not frames:
        return
    try:
        await group_publish(conversation_group(conversation_id), dict(published(frames)))
        notice = owner_changed_of(conversation_id=conversation_id, frames=frames)
        if notice is not None:
            await group_publish(OWNER_SOCKETS_GROUP, dict(notice))
    except Exception:
        logger.warning("could not publish events of conversation %s", conversation_id, exc_info=True)


def event_list_after(*, conversation_id: uuid.UUID, after: int, limit: int = PAGE_SIZE) -> list[EventFrame]:
    """Return up to `limit` stored events after a sequence, in order."""
    rows = Event.objects.filter(conversation_id=conversation_id, sequence__gt=after).order_by("sequence")[:limit]
    return [event_frame(row) for row in rows]


def last_sequence(*, conversation_id: uuid.UUID) -> int:
    value = Conversation.objects.filter(id=conversation_id).values_list("last_sequence", flat=True).first()
    return int(value or 0)
