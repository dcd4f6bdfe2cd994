"""JSON API of a conversation's transcript: messages, events, submitting and cancelling turns."""

from __future__ import annotations

import uuid
from urllib.parse import quote

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import eventlog, selectors, turns
from conversations.export import FORMATS, conversation_export
from conversations.serializers import message_json, turn_json
from conversations.write_proposals import messages_with_decisions
from flarebot.core.api import StrictSerializer, StringField, parse_uuid
from flarebot.core.errors import InvalidInput, NotFound
from flarebot.core.text import ascii_whole_number
from tools.selectors import activity_page


class MessageSubmitInput(StrictSerializer):
    request_id = StringField()
    text = StringField()


def _active(conversation_id: str) -> uuid.UUID:
    parsed = parse_uuid(conversation_id, what="conversation id")
    if selectors.conversation_get_active(conversation_id=parsed) is None:
        raise NotFound("This conversation does not exist.", code="conversation_not_found")
    return parsed


class MessageListApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        snapshot = selectors.transcript_snapshot(conversation_id=parsed)
        if snapshot is None:
            raise NotFound("This conversation does not exist.", code="conversation_not_found")
        messages = [message_json(m) for m in snapshot.messages]
        messages = messages_with_decisions(conversation_id=parsed, transcript=messages)
        return Response(
            {
                "messages": messages,
                "last_sequence": snapshot.last_sequence,
                "turns": [turn_json(t) for t in snapshot.turns],
            }
        )

    @extend_schema(request=MessageSubmitInput, responses={202: OpenApiTypes.OBJECT})
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        body = MessageSubmitInput(data=request.data)
        body.is_valid(raise_exception=True)
        request_id = parse_uuid(body.validated_data["request_id"], what="request_id")
        turn, _ = turns.turn_submit(conversation_id=parsed, request_id=request_id, text=body.validated_data["text"])
        return Response({"turn_id": str(turn.id)}, status=status.HTTP_202_ACCEPTED)


class EventListApi(APIView):
    @extend_schema(parameters=[OpenApiParameter("after", int)], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, conversation_id: str) -> Response:
        parsed = _active(conversation_id)
        after = ascii_whole_number(request.query_params.get("after", "0"))
        if after is None:
            raise InvalidInput("after: must be a whole number of at least 0.", code="invalid_after")
        frames = eventlog.event_list_after(conversation_id=parsed, after=after)
        events = [{k: v for k, v in frame.items() if k != "type"} for frame in frames]
        return Response({"events": events, "last_sequence": eventlog.last_sequence(conversation_id=parsed)})


class CancelApi(APIView):
    @extend_schema(request=None, responses={202: OpenApiTypes.OBJECT})
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed = _active(conversation_id)
        if request.data not in ({}, None):
            raise InvalidInput("The cancel request takes no body.", code="invalid")
        turn_id = turns.turn_cancel(conversation_id=parsed)
        return Response({"turn_id": str(turn_id) if turn_id else None}, status=status.HTTP_202_ACCEPTED)


class ActivityListApi(APIView):
    @extend_schema(parameters=[OpenApiParameter("before", str)], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, conversation_id: str) -> Response:
        parsed = _active(conversation_id)
        page = activity_page(conversation_id=parsed, before=request.query_params.get("before"))
        return Response({"activities": page.activities, "next_cursor": page.next_cursor})


class ExportApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=list(FORMATS))], responses={200: OpenApiTypes.BINARY}
    )
    def get(self, request: Request, conversation_id: str) -> HttpResponse:
        parsed = parse_uuid(conversation_id, what="conversation id")
        exported = conversation_export(conversation_id=parsed, fmt=request.query_params.get("format", "md"))
        response = HttpResponse(exported.body, content_type=exported.content_type)
        # RFC 6266: an ASCII fallback and the UTF-8 name.
        ascii_name = exported.filename.encode("ascii", "replace").decode().replace("?", "_").replace('"', "_")
        response["Content-Disposition"] = (
            f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(exported.filename)}"
        )
        return response
