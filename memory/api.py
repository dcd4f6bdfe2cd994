"""JSON API of the memory: list, add, edit and delete facts, one or many (PROTOCOL.md "Memory").

A stale version is 409 with the current fact in `error.current`, so the page can show it
beside the owner's draft. Deleting many facts answers each one's outcome instead: a
stale fact stays (with its current text) while the others go.
"""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from flarebot.core.api import StrictSerializer, StringField, VersionField, number_parse
from flarebot.core.errors import InvalidInput
from flarebot.core.ids import uuid_parse
from flarebot.core.rows import MAX_VERSION
from flarebot.core.schema import (
    BODY_STATUSES,
    LINE_TEXT_CONTROLS,
    described,
    errors,
    list_of,
    path_id,
    text_rule,
    uuid_schema,
    whole_number,
)
from memory import selectors, services


def fact_id_parse(value: str) -> uuid.UUID:
    """Parse a fact id: a UUID in lowercase canonical form, or 400."""
    parsed = uuid_parse(value, lowercase=True)
    if parsed is None:
        raise InvalidInput("The id is not a valid fact id (a lowercase UUID).", code="invalid_id")
    return parsed


CONTENT = text_rule(
    max_utf16=services.MAX_CONTENT,
    refused=LINE_TEXT_CONTROLS,
    disguising=True,
    description="Tabs and line breaks are the only control characters; no direction controls or invisible "
    "characters (the server also takes a zero-width joiner inside an emoji sequence, which this pattern refuses).",
)
VERSION = whole_number(1, MAX_VERSION)
ID = uuid_schema(lowercase=True)


class FactInput(StrictSerializer):
    """A new fact."""

    content = described(CONTENT, StringField())


class FactUpdateInput(StrictSerializer):
    """A fact's new text, and the version it was read at."""

    content = described(CONTENT, StringField())
    version = described(VERSION, VersionField())


class FactDeleteItem(StrictSerializer):
    """A fact to delete, and the version it was read at."""

    id = described(ID, StringField())
    version = described(VERSION, VersionField())

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError({"non_field_errors": ['must be an object with "id" and "version".']})
        return super().to_internal_value(data)

    def validate_id(self, value: str) -> uuid.UUID:
        parsed = uuid_parse(value, lowercase=True)
        if parsed is None:
            raise serializers.ValidationError("not a valid fact id (a lowercase UUID).")
        return parsed


class DeleteItemsField(serializers.ListField):
    """The facts to delete: 1 to MAX_DELETE items, its length checked before any item."""

    default_error_messages = {
        "not_a_list": 'must be a list of objects with "id" and "version".',
        "empty": "name at least one fact.",
        "min_length": "name at least one fact.",
        "max_length": f"at most {services.MAX_DELETE} facts at once.",
    }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, list) and len(data) > services.MAX_DELETE:
            self.fail("max_length")
        return super().to_internal_value(data)


def _flat(detail: Any, path: str = "") -> dict[str, list[str]]:
    """A nested body's messages by the path of their field (`items[2].version`), as the error shape's `fields`."""
    if isinstance(detail, dict):
        found: dict[str, list[str]] = {}
        for key, value in detail.items():
            if key == "non_field_errors":
                inner = path or key
            elif isinstance(key, int):
                inner = f"{path}[{key}]"
            else:
                inner = f"{path}.{key}" if path else str(key)
            found.update(_flat(value, inner))
        return found
    name = path.rsplit(".", 1)[-1]
    messages = detail if isinstance(detail, list) else [detail]
    # A field's message may name the field already ("version: a whole number ...").
    return {path: [str(message).removeprefix(f"{name}: ") for message in messages]}


class FactsDeleteInput(StrictSerializer):
    """The facts to delete, each with the version it was read at."""

    items = DeleteItemsField(child=FactDeleteItem(), min_length=1, max_length=services.MAX_DELETE)

    def to_internal_value(self, data: Any) -> Any:
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as error:
            raise serializers.ValidationError(_flat(error.detail)) from None


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
FactDeletionOutput = inline_serializer(
    "FactDeletion",
    {
        "id": serializers.UUIDField(),
        "outcome": serializers.ChoiceField(choices=["deleted", "absent", "version_conflict"]),
        "current": type(FactOutput)(
            allow_null=True, help_text="The fact as it is now, for `version_conflict`; null otherwise."
        ),
    },
)
FactsDeletedOutput = inline_serializer(
    "FactsDeleted", {"results": list_of(FactDeletionOutput, min_length=1, max_length=services.MAX_DELETE)}
)
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


class FactsDeleteApi(APIView):
    @extend_schema(
        request=FactsDeleteInput,
        description=(
            "Deletes each named fact at its version, in one transaction, and answers each one's outcome "
            "in the order named: `deleted`; `absent` (no such active fact: deleted already, or never "
            "made); or `version_conflict` (the fact changed since that version and is kept; `current` "
            "is the fact as it is now). Items apply in the order named: a fact named again after it was "
            "deleted is `absent`. A refused request deletes nothing."
        ),
        responses={
            200: FactsDeletedOutput,
            **errors(*BODY_STATUSES, e400="`invalid`: a body field, named by its path in `fields`."),
        },
    )
    def post(self, request: Request) -> Response:
        body = FactsDeleteInput(data=request.data)
        body.is_valid(raise_exception=True)
        items = [(item["id"], item["version"]) for item in body.validated_data["items"]]
        deletions = services.facts_delete(items=items)
        return Response({"results": [_deletion_view(deletion) for deletion in deletions]})


def _deletion_view(deletion: services.FactDeletion) -> dict[str, Any]:
    current = None if deletion.current is None else selectors.fact_view(deletion.current)
    return {"id": str(deletion.fact_id), "outcome": deletion.outcome, "current": current}
