"""The conversation socket: authenticate, join the conversation's group, forward frames.

A refused handshake is accepted and closed at once with its code (4001, 4003, 4004), so a
browser can read it. An admitted socket checks its session again before acting on any
frame, and closes with 4001 as soon as the session ends, however it ends.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer

from attachments.errors import AttachmentInvalid
from conversations import eventlog, selectors, turns
from conversations.browser_tasks import services as browser_tasks
from conversations.clearing import conversation_clear
from conversations.eventlog import EventFrame, EventsPublished
from conversations.events import BrowserFrame, BrowserInput, OwnerChanged, browser_input_group, conversation_group
from conversations.frames import BrowserInputFrame, ClientFrame, frame_session_check, parse_client_frame
from conversations.serializers import conversation_json
from flarebot.core.database import db
from flarebot.core.errors import FlarebotError, InvalidInput
from flarebot.core.sessions import (
    OWNER_SOCKETS_GROUP,
    SessionState,
    owner_session_recheck,
    session_group,
)
from flarebot.core.sockets import (
    CLOSE_INVALID_REQUEST,
    CLOSE_NOT_FOUND,
    CLOSE_SESSION_EXPIRED,
    OwnerSocket,
    error_frame,
    owner_handshake_check,
    refuse,
    session_is_valid,
)
from flarebot.core.text import ascii_whole_number

T = TypeVar("T")


def _db(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """Run a database function off the event loop, in parallel with other sockets' calls.

    Channels' default runs every socket's database work on one thread per process; a
    burst of messages from many sockets would then queue behind each other. The threads
    keep their connections as the engine's do (`flarebot.core.database`): a frame pays no
    connection health check, and a connection that broke is replaced on its next use.
    """
    return db(function)


def _notices_param(scope: dict[str, Any]) -> bool:
    """Whether the client asked for the owner-wide frames (`notices=1`; an addition old clients never see)."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("notices")
    return values is not None and values[-1] == "1"


def _last_sequence_param(scope: dict[str, Any]) -> int | None:
    """Return the `last_sequence` query parameter (0 when absent), or None when malformed."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("last_sequence")
    return 0 if values is None else ascii_whole_number(values[-1])


@_db
def _events_after(conversation_id: uuid.UUID, after: int) -> list[EventFrame]:
    return eventlog.event_list_after(conversation_id=conversation_id, after=after)


class _SessionOver(Exception):
    """The socket's session no longer holds: the frame does nothing, the socket closes with 4001."""


def _as_owner(function: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """`_db` for a frame's action, whose first argument is the socket's session key.

    The session is checked again in the same hop to the database thread as the action, so
    a frame of a session HTTP would refuse does nothing and a valid one pays no second hop.
    """

    @functools.wraps(function)
    def checked(session_key: str, *args: Any) -> T:
        if owner_session_recheck(session_key=session_key) is not SessionState.VALID:
            raise _SessionOver
        return function(*args)

    return _db(checked)


@_as_owner
def _submit(
    conversation_id: uuid.UUID, request_id: str, text: str, version_of: str | None, attachments: list[Any] | None
) -> turns.Submitted:
    if version_of is not None and attachments:
        raise AttachmentInvalid("attachments: a version keeps its message's attachments; send none with it.")
    if version_of is not None:
        return turns.turn_submit_version_unpublished(
            conversation_id=conversation_id,
            request_id=uuid.UUID(request_id),
            text=text,
            version_of=uuid.UUID(version_of),
        )
    return turns.turn_submit_unpublished(
        conversation_id=conversation_id, request_id=uuid.UUID(request_id), text=text, attachments=attachments
    )


@_as_owner
def _cancel_all(conversation_id: uuid.UUID) -> None:
    turns.turn_cancel(conversation_id=conversation_id)
    browser_tasks.browser_task_cancel(conversation_id=conversation_id)


@_as_owner
def _clear(conversation_id: uuid.UUID) -> None:
    conversation_clear(conversation_id=conversation_id)


@_as_owner
def _answer(conversation_id: uuid.UUID, reply: browser_tasks.Reply) -> None:
    browser_tasks.critical_point_answer(conversation_id=conversation_id, reply=reply)


@_as_owner
def _start(conversation_id: uuid.UUID, proposal_id: str) -> None:
    browser_tasks.browser_task_start(conversation_id=conversation_id, proposal_id=uuid.UUID(proposal_id))


@_as_owner
def _dismiss(conversation_id: uuid.UUID, proposal_id: str) -> None:
    browser_tasks.browser_task_dismiss(conversation_id=conversation_id, proposal_id=uuid.UUID(proposal_id))


@_as_owner
def _input_check(conversation_id: uuid.UUID, task_id: str, critical_point_id: str) -> None:
    browser_tasks.browser_input_check(
        conversation_id=conversation_id, task_id=uuid.UUID(task_id), critical_point_id=critical_point_id
    )


@_db
def _unread(conversation_id: uuid.UUID) -> int | None:
    return selectors.conversation_unread(conversation_id=conversation_id)


@_db
def _listed(conversation_id: uuid.UUID) -> dict[str, Any] | None:
    conversation = selectors.conversation_listed(conversation_id=conversation_id)
    return None if conversation is None else conversation_json(conversation)


@_db
def _admission(conversation_id: uuid.UUID, session_key: str) -> int | None:
    """Check the session and the conversation again, now that the socket listens: a close code, or None."""
    if owner_session_recheck(session_key=session_key) is not SessionState.VALID:
        return CLOSE_SESSION_EXPIRED
    if selectors.conversation_get_active(conversation_id=conversation_id) is None:
        return CLOSE_NOT_FOUND
    return None


class ConversationConsumer(OwnerSocket):
    async def connect(self) -> None:
        handshake = await _db(owner_handshake_check)(self.scope)
        if handshake.refusal is not None or handshake.session_key is None:
            await refuse(self, handshake.refusal or CLOSE_SESSION_EXPIRED)
            return
        self.session_key = handshake.session_key
        try:
            self.conversation_id = uuid.UUID(self.scope["url_route"]["kwargs"]["conversation_id"])
        except ValueError:
            await refuse(self, CLOSE_NOT_FOUND)
            return
        last_sequence = _last_sequence_param(self.scope)
        self.notices = _notices_param(self.scope)
        if last_sequence is None:
            await self.accept()
            error = InvalidInput("last_sequence: must be a whole number of at least 0.", code="invalid_last_sequence")
            await self.send(text_data=json.dumps(error_frame(error)))
            await self.close(code=CLOSE_INVALID_REQUEST)
            return
        # Subscribe before checking again, so that a deletion or a sign-out that commits
        # in between still reaches this socket as its group's message.
        await self.subscribe(
            [conversation_group(self.conversation_id), session_group(self.session_key), OWNER_SOCKETS_GROUP]
        )
        refusal = await _admission(self.conversation_id, self.session_key)
        if refusal is not None:
            await self.refuse_subscribed(refusal)
            return
        await self.admit(handshake.expires_at)
        # Group messages that arrive during the replay wait in this consumer's queue and
        # are handled after it, deduplicated by sequence.
        self.last_sent = last_sequence
        await self._catch_up(until=None)

    async def _catch_up(self, *, until: int | None) -> None:
        """Send stored events after the last one sent (up to `until`), page by page."""
        while until is None or self.last_sent < until:
            frames = await _events_after(self.conversation_id, self.last_sent)
            for frame in frames:
                if until is not None and frame["sequence"] > until:
                    return
                await self.send(text_data=json.dumps(frame))
                self.last_sent = frame["sequence"]
            if len(frames) < eventlog.PAGE_SIZE:
                return

    async def events_published(self, message: EventsPublished) -> None:
        if not self.admitted:
            return  # queued while a refused handshake was being closed
        for frame in message["frames"]:
            sequence = frame["sequence"]
            if sequence <= self.last_sent:
                continue
            if sequence > self.last_sent + 1:
                await self._catch_up(until=sequence - 1)
            await self.send(text_data=json.dumps(frame))
            self.last_sent = sequence

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.admitted:
            return
        # The session may have ended in a way no group message announced (a re-keyed
        # session, a message lost with Redis): each action checks it first (`_as_owner`),
        # and a frame that is not understood is answered only while the session holds.
        try:
            frame = parse_client_frame(text_data, bytes_data)
        except FlarebotError as error:
            if not await session_is_valid(self.session_key):
                await self._end(CLOSE_SESSION_EXPIRED)
                return
            await self.send(text_data=json.dumps(error_frame(error)))
            return
        try:
            await self._act(frame)
        except _SessionOver:
            await self._end(CLOSE_SESSION_EXPIRED)
        except FlarebotError as error:
            await self.send(text_data=json.dumps(error_frame(error)))

    async def _act(self, frame: ClientFrame) -> None:
        key, conversation_id = self.session_key, self.conversation_id
        frame_session_check(frame, conversation_id=conversation_id)
        if frame["type"] == "user_message":
            submitted = await _submit(
                key,
                conversation_id,
                frame["request_id"],
                frame["text"],
                frame.get("version_of"),
                frame.get("attachments"),
            )
            ack = {"type": "ack", "request_id": frame["request_id"].lower(), "turn_id": str(submitted.turn.id)}
            await self.send(text_data=json.dumps(ack))
            # Published from this loop: a thread hopping back here would wait on it.
            await eventlog.events_publish(conversation_id=conversation_id, frames=submitted.frames)
        elif frame["type"] == "cancel_agent":
            await _cancel_all(key, conversation_id)
        elif frame["type"] == "clear_history":
            await _clear(key, conversation_id)
        elif frame["type"] == "critical_point_response":
            reply = browser_tasks.Reply(
                frame["critical_point_id"], response=frame["response"], approve=frame.get("approve")
            )
            await _answer(key, conversation_id, reply)
        elif frame["type"] == "email_consent_response":
            reply = browser_tasks.Reply(frame["critical_point_id"], consent=frame["consent"])
            await _answer(key, conversation_id, reply)
        elif frame["type"] == "browser_task_confirm":
            await _start(key, conversation_id, frame["proposal_id"])
        elif frame["type"] == "browser_task_dismiss":
            await _dismiss(key, conversation_id, frame["proposal_id"])
        elif frame["type"] == "browser_input":
            await self._browser_input(frame)

    async def _browser_input(self, frame: BrowserInputFrame) -> None:
        """Forward the owner's click or key to the worker showing the task's sign-in (never stored)."""
        await _input_check(self.session_key, self.conversation_id, frame["task_id"], frame["critical_point_id"])
        point = frame["critical_point_id"].lower()
        message = BrowserInput(type="browser.input", critical_point_id=point, input=frame["input"])
        await self.channel_layer.group_send(browser_input_group(frame["task_id"]), dict(message))

    async def browser_frame(self, message: BrowserFrame) -> None:
        """A live-view picture of a task's sign-in page: a presentation frame, without a sequence."""
        if self.admitted:
            frame = {
                "type": "frame",
                "task_id": message["task_id"],
                "image": message["image"],
                "width": message["width"],
                "height": message["height"],
            }
            await self.send(text_data=json.dumps(frame))

    async def owner_changed(self, message: OwnerChanged) -> None:
        """A conversation's unread count, name or place in the list, or the needs-you list moved:
        tell this page (no sequence)."""
        if not self.admitted or not self.notices:
            return
        conversation_id = message["conversation_id"]
        if conversation_id is not None and message.get("listed"):
            conversation = await _listed(uuid.UUID(conversation_id))
            if conversation is not None and self.admitted:
                frame = {"type": "unread", "conversation_id": conversation_id, "unread": conversation["unread"]}
                await self.send(text_data=json.dumps(frame))
                await self.send(text_data=json.dumps({"type": "conversation_changed", "conversation": conversation}))
        elif conversation_id is not None:
            unread = await _unread(uuid.UUID(conversation_id))
            if unread is not None and self.admitted:
                frame = {"type": "unread", "conversation_id": conversation_id, "unread": unread}
                await self.send(text_data=json.dumps(frame))
        if message["attention"] and self.admitted:
            await self.send(text_data=json.dumps({"type": "attention_changed"}))

    async def conversation_deleted(self, message: dict[str, Any]) -> None:
        await self._end(CLOSE_NOT_FOUND)


class UnknownRouteConsumer(AsyncWebsocketConsumer):
    """Refuse sockets on any path that is not a conversation."""

    async def connect(self) -> None:
        await refuse(self, CLOSE_NOT_FOUND)
