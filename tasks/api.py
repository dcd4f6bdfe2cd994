"""JSON API of scheduled tasks: definitions, run now, run history (PROTOCOL.md "Scheduled tasks").

A stale version is 409 `version_conflict` with the task as it is now in `error.current`.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from flarebot.core.api import StrictSerializer, StringField, VersionField
from flarebot.core.errors import InvalidInput
from flarebot.core.rows import MAX_VERSION
from tasks import runs, selectors, services

_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_NUMBER = re.compile(r"^[1-9][0-9]{0,9}$")


def id_parse(value: Any, *, what: str = "id") -> uuid.UUID:
    """Parse an id: a UUID in lowercase canonical form, or 400."""
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidInput(f"{what}: not a valid id (a lowercase UUID).", code="invalid_id")
    return uuid.UUID(value)


def number_parse(value: str | None, *, what: str, high: int, code: str) -> int:
    if value is None or not _NUMBER.match(value) or int(value) > high:
        raise InvalidInput(f"{what}: a whole number from 1 to {high}.", code=code)
    return int(value)


@extend_schema_field(OpenApiTypes.ANY)
class AnyField(serializers.Field):
    """A value the service checks itself (with messages that say what is accepted)."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class TaskCreateInput(StrictSerializer):
    id = StringField()
    conversation_id = StringField()
    name = AnyField()
    instructions = AnyField()
    schedule = AnyField()
    enabled = AnyField()


class TaskUpdateInput(StrictSerializer):
    expected_version = VersionField(name="expected_version")
    name = AnyField()
    instructions = AnyField()
    schedule = AnyField()
    enabled = AnyField()


class RunInput(StrictSerializer):
    request_id = StringField()


def _no_body(request: Request) -> None:
    if request.data not in ({}, None):
        raise InvalidInput("This request takes no body.", code="invalid")


class TaskListApi(APIView):
    @extend_schema(operation_id="tasks_list", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response({"tasks": selectors.tasks_views(selectors.task_list())})

    @extend_schema(request=TaskCreateInput, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        body = TaskCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        fields = body.validated_data
        task_id = id_parse(fields["id"])
        conversation_id = id_parse(fields["conversation_id"], what="conversation_id")
        data = services.task_input_clean(
            name=fields["name"],
            instructions=fields["instructions"],
            schedule=fields["schedule"],
            enabled=fields["enabled"],
        )
        task, _ = services.task_create(task_id=task_id, conversation_id=conversation_id, data=data)
        return Response(selectors.task_view(task), status=status.HTTP_201_CREATED)


class TaskDetailApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, task_id: str) -> Response:
        return Response(selectors.task_view(selectors.task_get(task_id=id_parse(task_id))))

    @extend_schema(request=TaskUpdateInput, responses={200: OpenApiTypes.OBJECT})
    def put(self, request: Request, task_id: str) -> Response:
        parsed = id_parse(task_id)
        body = TaskUpdateInput(data=request.data)
        body.is_valid(raise_exception=True)
        task = services.task_update(task_id=parsed, **body.validated_data)
        return Response(selectors.task_view(task))

    @extend_schema(
        request=None,
        parameters=[OpenApiParameter("expected_version", OpenApiTypes.INT, required=True)],
        responses={204: None},
    )
    def delete(self, request: Request, task_id: str) -> Response:
        parsed = id_parse(task_id)
        version = number_parse(
            request.query_params.get("expected_version"),
            what="expected_version",
            high=MAX_VERSION,
            code="invalid_version",
        )
        _no_body(request)
        services.task_delete(task_id=parsed, expected_version=version)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TaskRunsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("limit", OpenApiTypes.INT, required=False),
            OpenApiParameter("before", OpenApiTypes.STR, required=False),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, task_id: str) -> Response:
        parsed = id_parse(task_id)
        raw_limit = request.query_params.get("limit")
        limit = selectors.RUNS_DEFAULT
        if raw_limit is not None:
            limit = number_parse(raw_limit, what="limit", high=selectors.RUNS_MAX, code="invalid_limit")
        page = selectors.run_page(task_id=parsed, limit=limit, before=request.query_params.get("before"))
        return Response({"runs": page.runs, "next_cursor": page.next_cursor})

    @extend_schema(request=RunInput, responses={202: OpenApiTypes.OBJECT})
    def post(self, request: Request, task_id: str) -> Response:
        parsed = id_parse(task_id)
        body = RunInput(data=request.data)
        body.is_valid(raise_exception=True)
        request_id = id_parse(body.validated_data["request_id"], what="request_id")
        run = runs.task_run_now(task_id=parsed, request_id=request_id)
        return Response(selectors.runs_view([run])[0], status=status.HTTP_202_ACCEPTED)
