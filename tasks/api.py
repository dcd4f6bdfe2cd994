"""JSON API of scheduled tasks: definitions, run now, run history (PROTOCOL.md "Scheduled tasks").

A stale version is 409 `version_conflict` with the task as it is now in `error.current`.
Refusals say what is wrong in words; the field they are about is in `error.fields`.
"""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
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
from tasks import runs, selectors, services
from tasks.models import RunSource, RunStatus
from tasks.schedule import CRON_MAX


def _refused(message: str, *, field: str, code: str) -> InvalidInput:
    return InvalidInput(message, code=code, extra={"fields": {field: [message]}})


def id_parse(value: Any, *, field: str = "id", words: str = "task id") -> uuid.UUID:
    """Parse an id: a UUID in lowercase canonical form, or 400."""
    parsed = uuid_parse(value, lowercase=True)
    if parsed is None:
        raise _refused(f"The {words} is not a valid id (a lowercase UUID).", field=field, code="invalid_id")
    return parsed


def number_in_words(value: str | None, *, field: str, words: str, high: int, code: str) -> int:
    """`number_parse`'s rule, refused in words with the field named apart."""
    try:
        return number_parse(value, what=field, high=high, code=code)
    except InvalidInput:
        raise _refused(f"The {words} must be a whole number from 1 to {high}.", field=field, code=code) from None


def target_parse(conversation_id: Any, new_conversation: Any) -> uuid.UUID | None:
    """The conversation a new task goes to: an existing one's id, or None for a new one named after the task."""
    if type(new_conversation) is not bool:
        raise _refused(
            "Whether the task gets a new conversation must be true or false.", field="new_conversation", code="invalid"
        )
    if new_conversation:
        if conversation_id is not None:
            raise _refused(
                "Give a conversation or ask for a new one, not both.", field="conversation_id", code="invalid"
            )
        return None
    if conversation_id is None:
        raise _refused(
            "Choose the conversation the task sends its instructions to, or ask for a new one.",
            field="conversation_id",
            code="invalid",
        )
    return id_parse(conversation_id, field="conversation_id", words="conversation id")


@extend_schema_field(OpenApiTypes.ANY)
class AnyField(serializers.Field):
    """A value the service checks itself (with messages that say what is accepted)."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


ID = uuid_schema(lowercase=True)
VERSION = whole_number(1, MAX_VERSION)
NAME = text_rule(
    max_utf16=services.NAME_MAX,
    disguising=True,
    description="No control characters, direction controls or invisible characters; trimmed.",
)
INSTRUCTIONS = text_rule(
    max_utf16=services.INSTRUCTIONS_MAX,
    refused=LINE_TEXT_CONTROLS,
    description="Tabs and line breaks are the only control characters.",
)
SCHEDULE = {
    "description": "A one-off instant in the future, or a five-field cron expression that occurs; "
    "each in an IANA zone.",
    "oneOf": [
        {
            "type": "object",
            "properties": {
                "kind": {"enum": ["once"]},
                "at": {
                    "type": "string",
                    "format": "date-time",
                    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2})$",
                    "description": "Whole seconds, with Z or an offset.",
                },
                "timezone": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 64,
                    "default": "UTC",
                    "description": "The IANA zone it is shown and edited in; the instant does not depend on it.",
                },
            },
            "required": ["kind", "at"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "kind": {"enum": ["cron"]},
                "expression": {"type": "string", "minLength": 1, "maxLength": CRON_MAX},
                "timezone": {"type": "string", "minLength": 1, "maxLength": 64, "default": "UTC"},
            },
            "required": ["kind", "expression"],
            "additionalProperties": False,
        },
    ],
}


class TaskCreateInput(StrictSerializer):
    """A new task under the client's id; a retry of the same request answers the task as it is.

    It goes to an existing conversation (`conversation_id`), or, with `new_conversation`, to a
    new one named after the task, created with it (a refused task creates none).
    """

    id = described(ID, StringField())
    conversation_id = described(
        {
            **ID,
            "nullable": True,
            "description": "The conversation the task sends its instructions to; "
            "omitted or null with `new_conversation`.",
        },
        StringField(required=False, allow_null=True),
    )
    new_conversation = described(
        {
            "type": "boolean",
            "default": False,
            "description": "Create a new conversation named after the task, together with the task "
            "(instead of `conversation_id`).",
        },
        AnyField(required=False),
    )
    name = described(NAME, AnyField())
    instructions = described(INSTRUCTIONS, AnyField())
    schedule = described(SCHEDULE, AnyField())
    enabled = described({"type": "boolean"}, AnyField())
    notify_on_completion = described(
        {
            "type": "boolean",
            "description": "“Notify me”: each completed run is sent to the notification destinations. "
            "Optional; a new task leaves it off, an edit without it keeps it.",
        },
        AnyField(required=False),
    )


class TaskUpdateInput(StrictSerializer):
    """A task's fields, and the version they were read at."""

    expected_version = described(VERSION, VersionField(name="expected_version"))
    name = described(NAME, AnyField())
    instructions = described(INSTRUCTIONS, AnyField())
    schedule = described(SCHEDULE, AnyField())
    enabled = described({"type": "boolean"}, AnyField())
    notify_on_completion = described(
        {
            "type": "boolean",
            "description": "“Notify me”: each completed run is sent to the notification destinations. "
            "Optional; a new task leaves it off, an edit without it keeps it.",
        },
        AnyField(required=False),
    )


class RunInput(StrictSerializer):
    """A run now; the same request_id answers the same run."""

    request_id = described(ID, StringField())


RunOutput = inline_serializer(
    "TaskRun",
    {
        "id": serializers.UUIDField(),
        "source": serializers.ChoiceField(choices=RunSource.choices),
        "intended_at": serializers.DateTimeField(allow_null=True),
        "status": serializers.ChoiceField(choices=RunStatus.choices),
        "turn_id": serializers.UUIDField(allow_null=True),
        "conversation_id": serializers.UUIDField(),
        "missed_count": serializers.IntegerField(min_value=1),
        "created_at": serializers.DateTimeField(allow_null=True),
    },
)
TaskOutput = inline_serializer(
    "Task",
    {
        "id": serializers.UUIDField(),
        "conversation_id": serializers.UUIDField(allow_null=True),
        "name": serializers.CharField(),
        "instructions": serializers.CharField(),
        "schedule": described(SCHEDULE, serializers.DictField()),
        "schedule_text": serializers.CharField(
            help_text="The schedule in words with its zone, such as “Weekdays at 08:00, Europe/Berlin”; "
            "an expression without a plain wording as “Cron 0 9 1-7 * 1, Europe/Berlin”."
        ),
        "enabled": serializers.BooleanField(),
        "notify_on_completion": serializers.BooleanField(
            help_text="“Notify me”: each completed run is sent to the notification destinations (an addition)."
        ),
        "version": serializers.IntegerField(min_value=1, max_value=MAX_VERSION),
        "next_run_at": serializers.DateTimeField(allow_null=True),
        "upcoming": serializers.ListField(child=serializers.DateTimeField()),
        "previous_run": type(RunOutput)(allow_null=True),
        "scheduling_error": serializers.CharField(allow_null=True),
        "created_at": serializers.DateTimeField(allow_null=True),
        "updated_at": serializers.DateTimeField(allow_null=True),
    },
)
TaskListOutput = inline_serializer("TaskList", {"tasks": list_of(TaskOutput)})
RunPageOutput = inline_serializer(
    "TaskRunPage",
    {
        "runs": list_of(RunOutput, max_length=selectors.RUNS_MAX),
        "next_cursor": serializers.CharField(allow_null=True),
    },
)
NOT_FOUND = errors(404, e404="`not_found`: no such task (or it was deleted).")
STALE = errors(409, e409="`version_conflict`: the task changed; `error.current` is the task as it is now.")
INVALID = (
    "`invalid_task`, `invalid_schedule`, `invalid_id`, or `invalid` (a body field); "
    "the message says it in words, `fields` names the field."
)


def notify_check(fields: dict[str, Any]) -> None:
    """`notify_on_completion` may be left out (as before it existed), but when given it is true or false."""
    if "notify_on_completion" in fields and type(fields["notify_on_completion"]) is not bool:
        raise _refused(
            "Whether a completed run notifies you must be true or false.",
            field="notify_on_completion",
            code="invalid_task",
        )


def _no_body(request: Request) -> None:
    if request.data not in ({}, None):
        raise InvalidInput("This request takes no body.", code="invalid")


class TaskListApi(APIView):
    @extend_schema(operation_id="tasks_list", responses={200: TaskListOutput})
    def get(self, request: Request) -> Response:
        return Response({"tasks": selectors.tasks_views(selectors.task_list())})

    @extend_schema(
        request=TaskCreateInput,
        responses={
            201: TaskOutput,
            **errors(
                *BODY_STATUSES,
                e400=INVALID,
                e404="`conversation_not_found`.",
                e409="`id_conflict`: the id is another request's, or a deleted task's.",
                e429="`task_limit`: delete a task to add another.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        body = TaskCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        fields = body.validated_data
        task_id = id_parse(fields["id"])
        notify_check(fields)
        conversation_id = target_parse(fields.get("conversation_id"), fields.get("new_conversation", False))
        data = services.task_input_clean(
            name=fields["name"],
            instructions=fields["instructions"],
            schedule=fields["schedule"],
            enabled=fields["enabled"],
            notify_on_completion=fields.get("notify_on_completion"),
        )
        task, _ = services.task_create(task_id=task_id, conversation_id=conversation_id, data=data)
        return Response(selectors.task_view(task), status=status.HTTP_201_CREATED)


@extend_schema(parameters=[path_id("task_id", lowercase=True)])
class TaskDetailApi(APIView):
    @extend_schema(responses={200: TaskOutput, **errors(400, e400="`invalid_id`."), **NOT_FOUND})
    def get(self, request: Request, task_id: str) -> Response:
        return Response(selectors.task_view(selectors.task_get(task_id=id_parse(task_id))))

    @extend_schema(
        request=TaskUpdateInput,
        responses={200: TaskOutput, **errors(*BODY_STATUSES, e400=INVALID), **NOT_FOUND, **STALE},
    )
    def put(self, request: Request, task_id: str) -> Response:
        parsed = id_parse(task_id)
        body = TaskUpdateInput(data=request.data)
        body.is_valid(raise_exception=True)
        notify_check(body.validated_data)
        task = services.task_update(task_id=parsed, **body.validated_data)
        return Response(selectors.task_view(task))

    @extend_schema(
        request=None,
        description="Deletes the task; also 204 for a valid id that does not exist.",
        parameters=[OpenApiParameter("expected_version", VERSION, required=True)],
        responses={
            204: None,
            **errors(*BODY_STATUSES, e400="`invalid_id`, `invalid_version`."),
            **STALE,
        },
    )
    def delete(self, request: Request, task_id: str) -> Response:
        parsed = id_parse(task_id)
        version = number_in_words(
            request.query_params.get("expected_version"),
            field="expected_version",
            words="expected version",
            high=MAX_VERSION,
            code="invalid_version",
        )
        _no_body(request)
        services.task_delete(task_id=parsed, expected_version=version)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(parameters=[path_id("task_id", lowercase=True)])
class TaskRunsApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("limit", whole_number(1, selectors.RUNS_MAX), default=selectors.RUNS_DEFAULT),
            OpenApiParameter(
                "before",
                {"type": "string", "maxLength": 200},
                description="A `next_cursor` this endpoint returned; anything else is 400 `invalid_cursor`.",
            ),
        ],
        responses={
            200: RunPageOutput,
            **errors(400, e400="`invalid_id`, `invalid_limit`, `invalid_cursor`."),
            **NOT_FOUND,
        },
    )
    def get(self, request: Request, task_id: str) -> Response:
        parsed = id_parse(task_id)
        raw_limit = request.query_params.get("limit")
        limit = selectors.RUNS_DEFAULT
        if raw_limit is not None:
            limit = number_in_words(
                raw_limit, field="limit", words="limit", high=selectors.RUNS_MAX, code="invalid_limit"
            )
        page = selectors.run_page(task_id=parsed, limit=limit, before=request.query_params.get("before"))
        return Response({"runs": page.runs, "next_cursor": page.next_cursor})

    @extend_schema(
        request=RunInput, responses={202: RunOutput, **errors(*BODY_STATUSES, e400="`invalid_id`."), **NOT_FOUND}
    )
    def post(self, request: Request, task_id: str) -> Response:
        parsed = id_parse(task_id)
        body = RunInput(data=request.data)
        body.is_valid(raise_exception=True)
        request_id = id_parse(body.validated_data["request_id"], field="request_id", words="request id")
        run = runs.task_run_now(task_id=parsed, request_id=request_id)
        return Response(selectors.runs_view([run])[0], status=status.HTTP_202_ACCEPTED)


class TaskRunsSeenApi(APIView):
    @extend_schema(
        operation_id="task_runs_seen",
        request=None,
        description=(
            "An addition: the owner saw the failed and missed runs (the Tasks page was opened); they leave the "
            "needs-you list (`GET /api/attention/`). Every socket of the owner receives `attention_changed`."
        ),
        responses={
            200: inline_serializer("TaskRunsSeen", {"seen": serializers.IntegerField(min_value=0)}),
            **errors(*BODY_STATUSES),
        },
    )
    def post(self, request: Request) -> Response:
        _no_body(request)
        return Response({"seen": services.task_runs_seen()})
