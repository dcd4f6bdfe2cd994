"""JSON API of the memory: list, add, edit and delete facts (PROTOCOL.md "Memory").

A stale version is 409 with the current fact in `error.current`, so the page can show it
beside the owner's draft.
"""

from __future__ import annotations

import uuid

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from flarebot.core.api import StrictSerializer, StringField, VersionField, number_parse
from flarebot.core.errors import InvalidInput
from flarebot.core.ids import uuid_parse
from flarebot.core.rows import MAX_VERSION
from flarebot.core.schema import BODY_STATUSES, described, errors, list_of, path_id, text_rule, whole_number
from memory import selectors, services


def fact_id_parse(value: str) -> uuid.UUID:
    """Parse a fact id: a UUID in lowercase canonical form, or 400."""
    parsed = uuid_parse(value, lowercase=True)
    if parsed is None:
        raise InvalidInput("The id is not a valid fact id (a lowercase UUID).", code="invalid_id")
    return parsed


CONTENT = text_rule(
    max_utf16=services.MAX_CONTENT,
    refused=r"\x00-\x08\x0b-\x1f\x7f-\x9f",
    description="Tabs and line breaks are the only control characters.",
)
VERSION = whole_number(1, MAX_VERSION)


class FactInput(StrictSerializer):
    """A new fact."""

    content = described(CONTENT, StringField())


class FactUpdateInput(StrictSerializer):
    """A fact's new text, and the version it was read at."""

    content = described(CONTENT, StringField())
    version = described(VERSION, VersionField())


FactOutput = inline_serializer(
    "Fact",
    {
        "id": serializers.UUIDField(),
        "content": serializers.CharField(),
        "version": serializers.IntegerField(min_value=1, max_value=MAX_VERSION),
        "created_at": serializers.DateTimeField(),
        "updated_at": serializers.DateTimeField(),
    },
)
FactListOutput = inline_serializer("FactList", {"memories": list_of(FactOutput, max_length=services.MAX_FACTS)})
STALE = errors(
    409,
    e409="`version_conflict`: the fact changed since that version; `error.current` is the fact as it is now.",
)
FACT_ERRORS = "`invalid_fact`, `fact_too_long`, or `invalid` (a body field)."


class FactListApi(APIView):
    @extend_schema(responses={200: FactListOutput})
    def get(self, request: Request) -> Response:
        return Response({"memories": [selectors.fact_view(fact) for fact in selectors.fact_list()]})

    @extend_schema(
        request=FactInput,
        responses={
            201: FactOutput,
            **errors(*BODY_STATUSES, 429, e400=FACT_ERRORS, e429="`memory_full`: delete a fact to add another."),
        },
    )
    def post(self, request: Request) -> Response:
        body = FactInput(data=request.data)
        body.is_valid(raise_exception=True)
        fact = services.fact_create(content=body.validated_data["content"])
        return Response(selectors.fact_view(fact), status=status.HTTP_201_CREATED)


@extend_schema(parameters=[path_id("fact_id", lowercase=True)])
class FactDetailApi(APIView):
    @extend_schema(
        request=FactUpdateInput,
        responses={
            200: FactOutput,
            **errors(*BODY_STATUSES, 404, e400=f"`invalid_id`, {FACT_ERRORS}"),
            **STALE,
        },
    )
    def patch(self, request: Request, fact_id: str) -> Response:
        parsed_id = fact_id_parse(fact_id)
        body = FactUpdateInput(data=request.data)
        body.is_valid(raise_exception=True)
        fact = services.fact_update(fact_id=parsed_id, **body.validated_data)
        return Response(selectors.fact_view(fact))

    @extend_schema(
        request=None,
        description="Deletes the fact; also 204 for a valid id that does not exist.",
        parameters=[OpenApiParameter("version", VERSION, required=True)],
        responses={204: None, **errors(*BODY_STATUSES, e400="`invalid_id`, `invalid_version`."), **STALE},
    )
    def delete(self, request: Request, fact_id: str) -> Response:
        parsed_id = fact_id_parse(fact_id)
        version = number_parse(
            request.query_params.get("version"), what="version", high=MAX_VERSION, code="invalid_version"
        )
        if request.data not in ({}, None):
            raise InvalidInput("This request takes no body.", code="invalid")
        services.fact_delete(fact_id=parsed_id, version=version)
        return Response(status=status.HTTP_204_NO_CONTENT)
