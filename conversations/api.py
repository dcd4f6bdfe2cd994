"""JSON API of conversations: list, create, rename, a title from the model, clear, delete."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    PolymorphicProxySerializer,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import selectors, services
from conversations.clearing import conversation_clear
from conversations.search import RESULTS_MAX, conversations_search
from conversations.serializers import conversation_json
from conversations.services import NAME_MAX_UTF16
from conversations.titling import conversation_title_suggest
from flarebot.core.api import StrictSerializer, StringField, parse_uuid
from flarebot.core.errors import InvalidInput
from flarebot.core.schema import BODY_STATUSES, described, errors, list_of, path_id, text_rule
from memory.query import QUERY_MAX

NAME = text_rule(
    max_utf16=NAME_MAX_UTF16,
    disguising=True,
    description="No control characters, direction controls or invisible characters (the server also takes a "
    "zero-width joiner inside an emoji sequence, which this pattern refuses); trimmed.",
)


class ConversationCreateInput(StrictSerializer):
    """A new conversation; without a name, its first message titles it."""

    name = described(NAME, StringField(required=False))


@extend_schema_field({"type": "integer", "minimum": 0})
class SequenceField(serializers.Field):
    """A JSON integer sequence of 0 or more: no strings, booleans or fractions."""

    default_error_messages = {"invalid": "sequence: a whole number of 0 or more."}

    def to_internal_value(self, data: Any) -> int:
        if type(data) is not int or data < 0:
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> int:
        return int(value)


class ConversationReadInput(StrictSerializer):
    """The last event sequence the page showed the owner."""

    sequence = SequenceField()


class ConversationRenameInput(StrictSerializer):
    """The conversation's new name."""

    name = described(NAME, StringField())


ConversationOutput = inline_serializer(
    "Conversation",
    {
        "id": serializers.UUIDField(),
        "name": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "updated_at": serializers.DateTimeField(),
        "unread": serializers.IntegerField(
            min_value=0,
            help_text="An addition: the agent's messages (answers that ended, a browser task's questions and "
            "outcomes) after the owner's read mark.",
        ),
    },
)
ConversationListOutput = inline_serializer("ConversationList", {"conversations": list_of(ConversationOutput)})
SearchOutput = inline_serializer(
    "ConversationSearch",
    {
        "results": serializers.ListField(
            child=inline_serializer(
                "ConversationSearchResult",
                {
                    "conversation": ConversationOutput,
                    "message_id": serializers.UUIDField(allow_null=True),
                    "snippet": serializers.CharField(allow_blank=True),
                    "highlights": serializers.ListField(
                        child=serializers.ListField(
                            child=serializers.IntegerField(min_value=0), min_length=2, max_length=2
                        ),
                        help_text="The matched words' places in the snippet: [start, end) in UTF-16 code units.",
                    ),
                    "matches": serializers.IntegerField(
                        min_value=1, help_text="How many entries (messages, the name) of the conversation matched."
                    ),
                },
            ),
            max_length=RESULTS_MAX,
        )
    },
)


class ConversationListApi(APIView):
    @extend_schema(
        description="The conversations, newest activity first; with `q`, the best matches of a search instead.",
        parameters=[
            OpenApiParameter(
                "q",
                text_rule(
                    max_utf16=QUERY_MAX, refused="", description="Search names and message text instead of listing."
                ),
            )
        ],
        responses={
            200: PolymorphicProxySerializer(
                component_name="ConversationListOrSearch",
                serializers=[ConversationListOutput, SearchOutput],
                resource_type_field_name=None,
            ),
            **errors(400, e400="`invalid_query`: `q` is empty, blank or too long."),
        },
    )
    def get(self, request: Request) -> Response:
        query = request.query_params.get("q")
        if query is not None:
            return Response({"results": conversations_search(query=query)})
        return Response({"conversations": [conversation_json(c) for c in selectors.conversation_list()]})

    @extend_schema(request=ConversationCreateInput, responses={201: ConversationOutput, **errors(*BODY_STATUSES)})
    def post(self, request: Request) -> Response:
        body = ConversationCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        conversation = services.conversation_create(name=body.validated_data.get("name"))
        return Response(conversation_json(conversation), status=status.HTTP_201_CREATED)


@extend_schema(parameters=[path_id("conversation_id")])
class ConversationDetailApi(APIView):
    @extend_schema(
        request=ConversationRenameInput,
        responses={200: ConversationOutput, **errors(*BODY_STATUSES, 404)},
    )
    def patch(self, request: Request, conversation_id: str) -> Response:
        parsed_id = parse_uuid(conversation_id, what="conversation id")
        body = ConversationRenameInput(data=request.data)
        body.is_valid(raise_exception=True)
        conversation = services.conversation_rename(conversation_id=parsed_id, name=body.validated_data["name"])
        return Response(conversation_json(conversation))

    @extend_schema(
        request=None,
        description="Deletes the conversation; also 204 for a valid id that does not exist.",
        responses={204: None, **errors(400)},
    )
    def delete(self, request: Request, conversation_id: str) -> Response:
        services.conversation_delete(conversation_id=parse_uuid(conversation_id, what="conversation id"))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(parameters=[path_id("conversation_id")])
class ConversationClearApi(APIView):
    @extend_schema(
        request=None,
        description=(
            "Clears the history: the active answer and an unfinished browser task are stopped, then the "
            "messages, tool activities, sources, search entries, proposals, browser tasks and events go; "
            "the conversation keeps its name. Its sockets receive `conversation.cleared`."
        ),
        responses={
            200: ConversationOutput,
            **errors(*BODY_STATUSES, 404, 409, e409="`clear_busy`: the answer did not stop in time; nothing cleared."),
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed_id = parse_uuid(conversation_id, what="conversation id")
        if request.data not in ({}, None):
            raise InvalidInput("The clear request takes no body.", code="invalid")
        return Response(conversation_json(conversation_clear(conversation_id=parsed_id)))


TitleOutput = inline_serializer("ConversationTitle", {"title": serializers.CharField()})


@extend_schema(parameters=[path_id("conversation_id")])
class ConversationTitleApi(APIView):
    @extend_schema(
        request=None,
        description=(
            "An addition: asks the model the conversation's turns use for a title of its first message and "
            "answer (at most 6 words) and returns it; nothing is stored (the owner saves it as a rename)."
        ),
        responses={
            200: TitleOutput,
            **errors(
                *BODY_STATUSES,
                404,
                e409="`nothing_to_title`: the conversation has no message yet.",
                e502="`title_unavailable`: the model could not be asked (no key, an error, 15 s passed) or "
                "gave no title; `message` says which.",
            ),
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed_id = parse_uuid(conversation_id, what="conversation id")
        if request.data not in ({}, None):
            raise InvalidInput("The title request takes no body.", code="invalid")
        return Response({"title": conversation_title_suggest(conversation_id=parsed_id)})


@extend_schema(parameters=[path_id("conversation_id")])
class ConversationReadApi(APIView):
    @extend_schema(
        request=ConversationReadInput,
        description=(
            "An addition: marks the conversation read up to `sequence` (the last event the page showed). "
            "The mark never moves back: an older sequence changes nothing. Every socket of the owner "
            "receives the new count as an `unread` frame."
        ),
        responses={
            200: ConversationOutput,
            **errors(
                *BODY_STATUSES,
                404,
                e400="`invalid_sequence`: past the conversation's last event; nothing changed.",
            ),
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed_id = parse_uuid(conversation_id, what="conversation id")
        body = ConversationReadInput(data=request.data)
        body.is_valid(raise_exception=True)
        conversation = services.conversation_read(conversation_id=parsed_id, sequence=body.validated_data["sequence"])
        return Response(conversation_json(conversation))
