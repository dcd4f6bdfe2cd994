"""JSON API of a conversation's transcript: messages, events, submitting and cancelling turns."""

from __future__ import annotations

import uuid
from urllib.parse import quote

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from attachments.errors import AttachmentInvalid
from attachments.limits import MESSAGE_FILES_MAX
from conversations import eventlog, selectors, turns
from conversations.api import ConversationOutput
from conversations.errors import ConversationNotFound
from conversations.export import FORMATS, conversation_export
from conversations.models import MessageRole, TurnStatus
from conversations.serializers import answer_versions_of, message_json, turn_json, versions_of_message
from conversations.versions import branch_switch_published
from conversations.write_proposals import messages_with_decisions
from flarebot.core.api import StrictSerializer, StringField, parse_uuid
from flarebot.core.errors import InvalidInput
from flarebot.core.schema import (
    BODY_STATUSES,
    described,
    errors,
    list_of,
    path_id,
    text_rule,
    uuid_schema,
    whole_number,
)
from flarebot.core.text import ascii_whole_number
from tools.models import ActivityStatus
from tools.selectors import PAGE_SIZE as ACTIVITY_PAGE
from tools.selectors import activity_page

# Digits `after` may have (ascii_whole_number's default).
AFTER_MAX = 10**18 - 1


class MessageSubmitInput(StrictSerializer):
    """A user message; a repeated request_id returns the turn the first one queued."""

    request_id = described(uuid_schema(lowercase=False), StringField())
    text = described(text_rule(max_utf16=turns.MAX_TEXT_UTF16, refused=r"\x00", description="No NUL."), StringField())
    version_of = described(
        uuid_schema(lowercase=False),
        StringField(
            required=False,
            help_text=(
                "An addition: send this as a new version of a shown turn's message (the same text answers it "
                "again: Regenerate, Retry; another text edits it). 409 `branch_busy` while an answer is written."
            ),
        ),
    )
    attachments = described(
        {"type": "array", "items": uuid_schema(lowercase=False), "maxItems": MESSAGE_FILES_MAX},
        # Taken as sent: attachments.services checks it, with one error code for any fault.
        serializers.JSONField(
            required=False,
            help_text=(
                "An addition: ids of files uploaded to this conversation (POST .../attachments/) and not sent yet; "
                "`text` may then be empty. 400 `invalid_attachment`, 413 `too_large` (over 100 MB in all); not "
                "with `version_of` (a version keeps its message's attachments)."
            ),
        ),
    )


class BranchInput(StrictSerializer):
    turn_id = described(uuid_schema(lowercase=False), StringField(help_text="A turn named in a `versions` list."))


def _message_fields() -> dict[str, serializers.Field]:
    """A message's fields, fresh (a field binds to one serializer)."""
    return {
        "id": serializers.UUIDField(),
        "role": serializers.ChoiceField(choices=MessageRole.choices),
        "parts": serializers.ListField(
            child=serializers.DictField(), help_text='`{"type": "text", "text"}` and tool parts.'
        ),
        "created_at": serializers.DateTimeField(),
        "turn_id": serializers.UUIDField(),
        "versions": serializers.ListField(
            child=serializers.UUIDField(),
            required=False,
            help_text=(
                "An addition, in the transcript: the turns of this message's versions in order, its own among them "
                "(for a user message, one per text sent here; for an answer, the answers to this message); empty "
                "when it has one. `POST .../branch/` shows another."
            ),
        ),
    }


MessageOutput = inline_serializer("Message", _message_fields())
TranscriptOutput = inline_serializer(
    "Transcript",
    {
        "messages": list_of(MessageOutput),
        "last_sequence": serializers.IntegerField(min_value=0),
        "turns": serializers.ListField(
            child=inline_serializer(
                "TurnState",
                {
                    "id": serializers.UUIDField(),
                    "status": serializers.ChoiceField(choices=TurnStatus.choices),
                    "error": inline_serializer(
                        "TurnError",
                        {"code": serializers.CharField(), "message": serializers.CharField()},
                        allow_null=True,
                        help_text="Why a failed turn failed; null otherwise.",
                    ),
                    "answer_versions": serializers.ListField(
                        child=serializers.UUIDField(),
                        help_text="An addition: the versions of this turn's answer (as its message's `versions`).",
                    ),
                },
            )
        ),
    },
)
TurnAccepted = inline_serializer("TurnAccepted", {"turn_id": serializers.UUIDField()})
EventsOutput = inline_serializer(
    "EventPage",
    {
        "events": serializers.ListField(
            child=inline_serializer(
                "Event",
                {
                    "sequence": serializers.IntegerField(min_value=1),
                    "event": serializers.CharField(),
                    "turn_id": serializers.UUIDField(allow_null=True),
                    "data": serializers.DictField(),
                },
            ),
            max_length=eventlog.PAGE_SIZE,
        ),
        "last_sequence": serializers.IntegerField(min_value=0),
    },
)
CancelOutput = inline_serializer("CancelAccepted", {"turn_id": serializers.UUIDField(allow_null=True)})
ActivityOutput = inline_serializer(
    "Activity",
    {
        "id": serializers.UUIDField(),
        "turn_id": serializers.UUIDField(),
        "tool_call_id": serializers.CharField(allow_blank=True),
        "kind": serializers.CharField(),
        "label": serializers.CharField(allow_blank=True),
        "status": serializers.ChoiceField(choices=ActivityStatus.choices),
        "progress": inline_serializer(
            "ActivityProgress",
            {
                "message": serializers.CharField(allow_blank=True),
                "done": serializers.IntegerField(allow_null=True),
                "total": serializers.IntegerField(allow_null=True),
                "output": inline_serializer(
                    "ActivityOutput",
                    {
                        "start": serializers.IntegerField(min_value=0),
                        "text": serializers.CharField(allow_blank=True),
                    },
                    required=False,
                ),
            },
            allow_null=True,
        ),
        "summary": serializers.CharField(allow_blank=True),
        "hint": serializers.CharField(allow_blank=True),
        "execution_count": serializers.IntegerField(min_value=0),
        "created_at": serializers.DateTimeField(),
        "started_at": serializers.DateTimeField(allow_null=True),
        "finished_at": serializers.DateTimeField(allow_null=True),
        "duration_ms": serializers.IntegerField(allow_null=True),
        "interrupted_at": serializers.DateTimeField(
            allow_null=True, help_text="The latest interruption of the call (its worker died); a re-run keeps it."
        ),
    },
)
ActivitiesOutput = inline_serializer(
    "ActivityPage",
    {
        "activities": list_of(ActivityOutput, max_length=ACTIVITY_PAGE),
        "next_cursor": serializers.CharField(allow_null=True),
    },
)
ExportedAttachmentOutput = inline_serializer(
    "ExportedAttachment",
    {
        "id": serializers.UUIDField(),
        "name": serializers.CharField(),
        "media_type": serializers.CharField(),
        "size": serializers.IntegerField(min_value=0),
        "sha256": serializers.CharField(),
    },
)
ExportedMessageOutput = inline_serializer(
    "ExportedMessage",
    {
        **_message_fields(),
        "attachments": list_of(
            ExportedAttachmentOutput, help_text="An addition: the files of the message's `attachment` parts, in order."
        ),
    },
)
ExportOutput = inline_serializer(
    "ConversationExport",
    {
        "conversation": ConversationOutput,
        "messages": list_of(ExportedMessageOutput),
        "exported_at": serializers.DateTimeField(),
    },
)
NOT_FOUND = errors(404, e404="`conversation_not_found`: unknown or deleted.")
CURSOR = OpenApiParameter(
    "before",
    {"type": "string", "maxLength": 200},
    description="A `next_cursor` this endpoint returned; anything else is 400 `invalid_cursor`.",
)


def _active(conversation_id: str) -> uuid.UUID:
    parsed = parse_uuid(conversation_id, what="conversation id")
    selectors.conversation_require_active(conversation_id=parsed)
    return parsed


@extend_schema(parameters=[path_id("conversation_id")])
class MessageListApi(APIView):
    @extend_schema(responses={200: TranscriptOutput, **errors(400), **NOT_FOUND})
    def get(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        snapshot = selectors.transcript_snapshot(conversation_id=parsed)
        if snapshot is None:
            raise ConversationNotFound()
        versions = snapshot.versions
        messages = [message_json(m) | {"versions": versions_of_message(m, versions)} for m in snapshot.messages]
        messages = messages_with_decisions(conversation_id=parsed, transcript=messages)
        return Response(
            {
                "messages": messages,
                "last_sequence": snapshot.last_sequence,
                "turns": [turn_json(t) | {"answer_versions": answer_versions_of(t, versions)} for t in snapshot.turns],
            }
        )

    @extend_schema(
        request=MessageSubmitInput,
        responses={
            202: TurnAccepted,
            **errors(
                *BODY_STATUSES,
                e400="`invalid_text`, `invalid_id`, `invalid_version`, `invalid_attachment`, ...",
                e409="`branch_busy`: with `version_of`, while an answer is being written.",
            ),
            **NOT_FOUND,
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        body = MessageSubmitInput(data=request.data)
        body.is_valid(raise_exception=True)
        request_id = parse_uuid(body.validated_data["request_id"], what="request_id")
        text, version_of = body.validated_data["text"], body.validated_data.get("version_of")
        attachments = body.validated_data.get("attachments")
        if version_of is None:
            turn, _ = turns.turn_submit(
                conversation_id=parsed, request_id=request_id, text=text, attachments=attachments
            )
        elif attachments:
            raise AttachmentInvalid("attachments: a version keeps its message's attachments; send none with it.")
        else:
            turn = turns.turn_submit_version_published(
                conversation_id=parsed,
                request_id=request_id,
                text=text,
                version_of=parse_uuid(version_of, what="version_of"),
            )
        return Response({"turn_id": str(turn.id)}, status=status.HTTP_202_ACCEPTED)


@extend_schema(parameters=[path_id("conversation_id")])
class BranchApi(APIView):
    @extend_schema(
        request=BranchInput,
        description=(
            "An addition: show the branch of versions through this turn (ending at its newest turn). Kept on the "
            "server; the conversation's sockets receive `conversation.branch_switched`."
        ),
        responses={
            200: inline_serializer("BranchShown", {"head_turn_id": serializers.UUIDField()}),
            **errors(
                *BODY_STATUSES,
                404,
                409,
                e400="`invalid_turn`: not a message of this conversation; `invalid_id`.",
                e409="`branch_busy`: an answer is being written; nothing changed.",
            ),
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        body = BranchInput(data=request.data)
        body.is_valid(raise_exception=True)
        turn_id = parse_uuid(body.validated_data["turn_id"], what="turn_id")
        head = branch_switch_published(conversation_id=parsed, turn_id=turn_id)
        return Response({"head_turn_id": str(head)})


@extend_schema(parameters=[path_id("conversation_id")])
class EventListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "after", whole_number(0, AFTER_MAX), description="Events after this sequence; 0 by default."
            )
        ],
        responses={200: EventsOutput, **errors(400, e400="`invalid_id`, `invalid_after`."), **NOT_FOUND},
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        parsed = _active(conversation_id)
        after = ascii_whole_number(request.query_params.get("after", "0"))
        if after is None:
            raise InvalidInput("after: must be a whole number of at least 0.", code="invalid_after")
        frames = eventlog.event_list_after(conversation_id=parsed, after=after)
        events = [{k: v for k, v in frame.items() if k != "type"} for frame in frames]
        return Response({"events": events, "last_sequence": eventlog.last_sequence(conversation_id=parsed)})


@extend_schema(parameters=[path_id("conversation_id")])
class CancelApi(APIView):
    @extend_schema(
        request=None,
        description="Stops the active turn, keeping its partial output; `turn_id` is null when none ran.",
        responses={202: CancelOutput, **errors(*BODY_STATUSES), **NOT_FOUND},
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed = _active(conversation_id)
        if request.data not in ({}, None):
            raise InvalidInput("The cancel request takes no body.", code="invalid")
        turn_id = turns.turn_cancel(conversation_id=parsed)
        return Response({"turn_id": str(turn_id) if turn_id else None}, status=status.HTTP_202_ACCEPTED)


@extend_schema(parameters=[path_id("conversation_id")])
class ActivityListApi(APIView):
    @extend_schema(
        parameters=[CURSOR],
        responses={200: ActivitiesOutput, **errors(400, e400="`invalid_id`, `invalid_cursor`."), **NOT_FOUND},
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        parsed = _active(conversation_id)
        page = activity_page(conversation_id=parsed, before=request.query_params.get("before"))
        return Response({"activities": page.activities, "next_cursor": page.next_cursor})


@extend_schema(parameters=[path_id("conversation_id")])
class ExportApi(APIView):
    @extend_schema(
        description="The whole conversation as a download (`Content-Disposition: attachment`).",
        parameters=[
            OpenApiParameter("format", str, enum=list(FORMATS), default="md"),
            OpenApiParameter(
                "Content-Disposition",
                str,
                OpenApiParameter.HEADER,
                response=[200],
                required=True,
                description="`attachment` with the conversation's name as the file name.",
            ),
        ],
        responses={
            (200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR, description="`format=md` (the default)."),
            (200, "application/json"): OpenApiResponse(ExportOutput, description="`format=json`."),
            **errors(400, e400="`invalid_id`, `invalid_format`."),
            **NOT_FOUND,
        },
    )
    def get(self, request: Request, conversation_id: str) -> HttpResponse:
        parsed = parse_uuid(conversation_id, what="conversation id")
        exported = conversation_export(
            conversation_id=parsed, fmt=request.query_params.get("format", "md"), origin=request.build_absolute_uri("/")
        )
        response = HttpResponse(exported.body, content_type=exported.content_type)
        # RFC 6266: an ASCII fallback and the UTF-8 name.
        ascii_name = exported.filename.encode("ascii", "replace").decode().replace("?", "_").replace('"', "_")
        response["Content-Disposition"] = (
            f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(exported.filename)}"
        )
        return response
