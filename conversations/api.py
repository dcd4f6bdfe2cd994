"""JSON API of conversations: list, create, rename, delete."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import selectors, services
from conversations.search import conversations_search
from conversations.serializers import conversation_json
from flarebot.core.api import StrictSerializer, StringField, parse_uuid


class ConversationCreateInput(StrictSerializer):
    name = StringField(required=False)


class ConversationRenameInput(StrictSerializer):
    name = StringField()


ConversationOutput = inline_serializer(
    "Conversation",
    {
        "id": serializers.UUIDField(),
        "name": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "updated_at": serializers.DateTimeField(),
    },
)


class ConversationListApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("q", str, description="search names and message text instead of listing")],
        responses=inline_serializer("ConversationList", {"conversations": ConversationOutput}),
    )
    def get(self, request: Request) -> Response:
        query = request.query_params.get("q")
        if query is not None:
            return Response({"results": conversations_search(query=query)})
        return Response({"conversations": [conversation_json(c) for c in selectors.conversation_list()]})

    @extend_schema(request=ConversationCreateInput, responses={201: ConversationOutput})
    def post(self, request: Request) -> Response:
        body = ConversationCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        conversation = services.conversation_create(name=body.validated_data.get("name"))
        return Response(conversation_json(conversation), status=status.HTTP_201_CREATED)


class ConversationDetailApi(APIView):
    @extend_schema(request=ConversationRenameInput, responses={200: ConversationOutput})
    def patch(self, request: Request, conversation_id: str) -> Response:
        parsed_id = parse_uuid(conversation_id, what="conversation id")
        body = ConversationRenameInput(data=request.data)
        body.is_valid(raise_exception=True)
        conversation = services.conversation_rename(conversation_id=parsed_id, name=body.validated_data["name"])
        return Response(conversation_json(conversation))

    @extend_schema(responses={204: None})
    def delete(self, request: Request, conversation_id: str) -> Response:
        services.conversation_delete(conversation_id=parse_uuid(conversation_id, what="conversation id"))
        return Response(status=status.HTTP_204_NO_CONTENT)
