"""JSON API of browser tasks: list and start a conversation's tasks, and the agent's cancel."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import selectors, turns
from conversations.browser_tasks import services
from conversations.browser_tasks.lifecycle.record import STEP_OUTCOMES
from conversations.browser_tasks.selectors import browser_tasks_list
from conversations.errors import ConversationNotFound
from conversations.models import BrowserTaskStatus, CriticalPointKind, CriticalPointState, ProposalState
from flarebot.core.api import StrictSerializer, StringField, parse_uuid
from flarebot.core.errors import NotFound
from flarebot.core.schema import BODY_STATUSES, described, errors, path_id, uuid_schema


class BrowserTaskStartInput(StrictSerializer):
    """The proposal the owner starts."""

    proposal_id = described(uuid_schema(lowercase=False), StringField())


class AgentCancelInput(StrictSerializer):
    """The conversation whose work stops."""

    session_id = described(uuid_schema(lowercase=False), StringField())


_COMMON: dict[str, serializers.Field] = {
    "goal": serializers.CharField(),
    "start_url": serializers.CharField(),
    "restrictions": serializers.ListField(child=serializers.CharField()),
    "created_at": serializers.DateTimeField(),
}
# The task's record (`lifecycle.record`): what the card keeps after the end.
_STEP = inline_serializer(
    "BrowserTaskStep",
    {
        "number": serializers.IntegerField(min_value=1),
        "action": serializers.CharField(allow_blank=True),
        "description": serializers.CharField(allow_blank=True),
        "element": inline_serializer(
            "BrowserTaskElement",
            {
                "number": serializers.IntegerField(),
                "role": serializers.CharField(allow_blank=True),
                "name": serializers.CharField(allow_blank=True),
            },
            allow_null=True,
        ),
        "page": serializers.CharField(allow_blank=True),
        "outcome": serializers.ChoiceField(choices=STEP_OUTCOMES),
        "critical_point_id": serializers.UUIDField(allow_null=True),
    },
)
_QUESTION = inline_serializer(
    "BrowserTaskQuestion",
    {
        "critical_point_id": serializers.UUIDField(),
        "kind": serializers.ChoiceField(choices=CriticalPointKind.choices),
        "question": serializers.CharField(allow_blank=True),
        "action": serializers.DictField(allow_null=True),
        "state": serializers.ChoiceField(choices=CriticalPointState.choices),
        "answer": inline_serializer(
            "BrowserTaskAnswer",
            {
                "response": serializers.CharField(allow_blank=True),
                "approve": serializers.BooleanField(allow_null=True),
                "consent": serializers.BooleanField(allow_null=True),
            },
            allow_null=True,
        ),
        "created_at": serializers.DateTimeField(),
        "resolved_at": serializers.DateTimeField(allow_null=True),
    },
)
BrowserTasksOutput = inline_serializer(
    "BrowserTaskList",
    {
        "tasks": serializers.ListField(
            child=inline_serializer(
                "BrowserTask",
                {
                    "task_id": serializers.UUIDField(),
                    "proposal_id": serializers.UUIDField(),
                    "status": serializers.ChoiceField(choices=BrowserTaskStatus.choices),
                    **_COMMON,
                    "open_critical_point": inline_serializer(
                        "CriticalPoint",
                        {
                            "critical_point_id": serializers.UUIDField(),
                            "kind": serializers.ChoiceField(choices=CriticalPointKind.choices),
                            "question": serializers.CharField(allow_blank=True),
                            "action": serializers.DictField(allow_null=True),
                            "created_at": serializers.DateTimeField(),
                        },
                        allow_null=True,
                    ),
                    "summary": serializers.CharField(allow_null=True, allow_blank=True),
                    "steps": serializers.ListField(child=_STEP),
                    "questions": serializers.ListField(child=_QUESTION),
                    "finished_at": serializers.DateTimeField(allow_null=True),
                },
            )
        ),
        "proposals": serializers.ListField(
            child=inline_serializer(
                "BrowserTaskProposal",
                {
                    "proposal_id": serializers.UUIDField(),
                    "status": serializers.ChoiceField(choices=ProposalState.choices),
                    **_COMMON,
                    "corrects_task_id": serializers.UUIDField(allow_null=True),
                    "carried_restrictions": serializers.ListField(child=serializers.CharField()),
                },
            )
        ),
        "last_sequence": serializers.IntegerField(min_value=0),
    },
)
TaskStarted = inline_serializer(
    "BrowserTaskStarted",
    {"task_id": serializers.UUIDField(), "status": serializers.ChoiceField(choices=BrowserTaskStatus.choices)},
)
AgentStopped = inline_serializer(
    "AgentStopped",
    {"turn_id": serializers.UUIDField(allow_null=True), "task_id": serializers.UUIDField(allow_null=True)},
)


@extend_schema(parameters=[path_id("conversation_id")])
class BrowserTaskListApi(APIView):
    @extend_schema(
        responses={200: BrowserTasksOutput, **errors(400, 404, e404="`conversation_not_found`.")},
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        listed = browser_tasks_list(conversation_id=parse_uuid(conversation_id, what="conversation id"))
        if listed is None:
            raise ConversationNotFound()
        return Response(listed)

    @extend_schema(
        request=BrowserTaskStartInput,
        responses={
            202: TaskStarted,
            **errors(
                *BODY_STATUSES,
                e404="`conversation_not_found`, `proposal_not_found`.",
                e409="`proposal_dismissed`, `proposal_superseded`, `proposal_started`, `task_unfinished`.",
            ),
        },
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        body = BrowserTaskStartInput(data=request.data)
        body.is_valid(raise_exception=True)
        proposal_id = parse_uuid(body.validated_data["proposal_id"], what="proposal_id")
        selectors.conversation_require_active(conversation_id=parsed)
        task = services.browser_task_start(conversation_id=parsed, proposal_id=proposal_id)
        return Response({"task_id": str(task.id), "status": task.status}, status=status.HTTP_202_ACCEPTED)


class AgentApi(APIView):
    @extend_schema(
        request=AgentCancelInput,
        responses={
            202: AgentStopped,
            **errors(*BODY_STATUSES, e404="`conversation_not_found`; `nothing_unfinished` when nothing runs."),
        },
    )
    def delete(self, request: Request) -> Response:
        """Stop the conversation's active turn and its unfinished browser task (404 when neither runs)."""
        body = AgentCancelInput(data=request.data)
        body.is_valid(raise_exception=True)
        conversation_id = parse_uuid(body.validated_data["session_id"], what="session_id")
        selectors.conversation_require_active(conversation_id=conversation_id)
        turn_id = turns.turn_cancel(conversation_id=conversation_id)
        task_id = services.browser_task_cancel(conversation_id=conversation_id)
        if turn_id is None and task_id is None:
            raise NotFound("Nothing of this conversation is unfinished.", code="nothing_unfinished")
        return Response(
            {"turn_id": str(turn_id) if turn_id else None, "task_id": str(task_id) if task_id else None},
            status=status.HTTP_202_ACCEPTED,
        )
