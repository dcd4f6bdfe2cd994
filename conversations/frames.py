"""The client frames of the conversation socket, parsed strictly.

A frame that is not a JSON object of a known type with exactly its fields raises
InvalidInput; the consumer answers with an error frame and changes nothing.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict
from uuid import UUID

from flarebot.core.errors import InvalidInput, TooLarge
from flarebot.core.ids import uuid_parse
from flarebot.core.json_input import JsonRefused, json_parse
from tools.browser_tasks.inputs import owner_input_problem

# A 32,000-character message JSON-escaped (\uXXXX surrogate pairs) stays well below this.
MAX_FRAME_BYTES = 256 * 1024


class UserMessageFrame(TypedDict):
    type: Literal["user_message"]
    request_id: str
    text: str
    # An addition: a new version of a shown turn's message (conversations.versions).
    version_of: NotRequired[str]
    # An addition: ids of files uploaded to the conversation (attachments.services checks them).
    attachments: NotRequired[list[str]]


class CancelAgentFrame(TypedDict):
    type: Literal["cancel_agent"]


class ClearHistoryFrame(TypedDict):
    """An addition: clear the conversation's history (answered by the `conversation.cleared` event)."""

    type: Literal["clear_history"]


class CriticalPointResponseFrame(TypedDict, total=False):
    type: Literal["critical_point_response"]
    critical_point_id: str
    response: str
    approve: bool  # optional: the owner's Approve (true) or Deny (false) of a held action
    session_id: str  # optional (seed 004's shape): must name this socket's conversation


class EmailConsentResponseFrame(TypedDict, total=False):
    type: Literal["email_consent_response"]
    critical_point_id: str
    consent: bool
    session_id: str  # optional (seed 004's shape): must name this socket's conversation


class BrowserTaskConfirmFrame(TypedDict):
    type: Literal["browser_task_confirm"]
    proposal_id: str


class BrowserTaskDismissFrame(TypedDict):
    type: Literal["browser_task_dismiss"]
    proposal_id: str


class BrowserInputFrame(TypedDict):
    type: Literal["browser_input"]
    task_id: str
    critical_point_id: str
    input: dict[str, Any]


ClientFrame = (
    UserMessageFrame
    | CancelAgentFrame
    | ClearHistoryFrame
    | CriticalPointResponseFrame
    | EmailConsentResponseFrame
    | BrowserTaskConfirmFrame
    | BrowserTaskDismissFrame
    | BrowserInputFrame
)

_FIELDS: dict[str, dict[str, type]] = {
    "user_message": {"request_id": str, "text": str},
    "cancel_agent": {},
    "clear_history": {},
    "critical_point_response": {"critical_point_id": str, "response": str},
    "email_consent_response": {"critical_point_id": str, "consent": bool},
    "browser_task_confirm": {"proposal_id": str},
    "browser_task_dismiss": {"proposal_id": str},
    "browser_input": {"task_id": str, "critical_point_id": str, "input": dict},
}
# Fields a frame may leave out (additions to the contract: older clients do not send them).
_OPTIONAL: dict[str, dict[str, type]] = {
    "user_message": {"version_of": str, "attachments": list},
    "critical_point_response": {"approve": bool, "session_id": str},
    "email_consent_response": {"session_id": str},
}


def parse_client_frame(text_data: str | None, bytes_data: bytes | None) -> ClientFrame:
    """Parse one socket frame or raise InvalidInput / TooLarge."""
    if text_data is None:
        raise InvalidInput("Frames must be JSON text.", code="invalid_frame")
    if len(text_data.encode("utf-8", "surrogatepass")) > MAX_FRAME_BYTES:
        raise TooLarge("The frame is too large.", code="frame_too_large")
    try:
        frame: Any = json_parse(text_data)
    except JsonRefused:
        raise InvalidInput("The frame is not valid JSON.", code="invalid_frame") from None
    if not isinstance(frame, dict):
        raise InvalidInput("The frame must be a JSON object.", code="invalid_frame")
    kind = frame.get("type")
    if not isinstance(kind, str) or kind not in _FIELDS:
        raise InvalidInput("Unknown frame type.", code="unknown_frame_type")
    expected, optional = _FIELDS[kind], _OPTIONAL.get(kind, {})
    extra = sorted(set(frame) - set(expected) - set(optional) - {"type"})
    if extra:
        raise InvalidInput(f"Unexpected field: {extra[0][:40]}.", code="invalid_frame")
    for name in expected:
        if name not in frame:
            raise InvalidInput(f"Missing field: {name}.", code="invalid_frame")
    for name, kind_of in {**expected, **optional}.items():
        if name in frame and not isinstance(frame[name], kind_of):
            raise InvalidInput(f"Field {name} has the wrong type.", code="invalid_frame")
    if kind == "user_message":
        _require_uuid(frame["request_id"], "request_id")
        if "version_of" in frame:
            _require_uuid(frame["version_of"], "version_of")
    elif kind in ("browser_task_confirm", "browser_task_dismiss"):
        _require_uuid(frame["proposal_id"], "proposal_id")
    elif kind == "browser_input":
        _require_uuid(frame["task_id"], "task_id")
        problem = owner_input_problem(frame["input"])
        if problem is not None:
            raise InvalidInput(problem, code="invalid_frame")
    return frame  # type: ignore[return-value]


def frame_session_check(frame: ClientFrame, *, conversation_id: UUID) -> None:
    """Refuse a frame whose `session_id` (seed 004's reply shape) names another conversation than its socket's."""
    session_id = frame.get("session_id")
    if session_id is None:
        return
    # The canonical form only, any case.
    if uuid_parse(session_id) != conversation_id:
        raise InvalidInput(
            "session_id names another conversation than this socket's; nothing was sent.", code="wrong_session"
        )


def _require_uuid(value: str, name: str) -> None:
    if uuid_parse(value) is None:
        raise InvalidInput(f"Field {name} must be a UUID.", code="invalid_frame")
