"""JSON API of browser tasks: list and start a conversation's tasks, and the agent's cancel."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import selectors, turns
from conversations.browser_tasks import services
from conversations.browser_tasks.selectors import browser_tasks_list
from flarebot.core.api import StrictSerializer, StringField, parse_uuid
from flarebot.core.errors import NotFound


class BrowserTaskStartInput(StrictSerializer):
    proposal_id = StringField()


class AgentCancelInput(StrictSerializer):
    session_id = StringField()


class BrowserTaskListApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, conversation_id: str) -> Response:
        listed = browser_tasks_list(conversation_id=parse_uuid(conversation_id, what="conversation id"))
        if listed is None:
            raise NotFound("This conversation does not exist.", code="conversation_not_found")
        return Response(listed)

    @extend_schema(request=BrowserTaskStartInput, responses={202: OpenApiTypes.OBJECT})
    def post(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        body = BrowserTaskStartInput(data=request.data)
        body.is_valid(raise_exception=True)
        proposal_id = parse_uuid(body.validated_data["proposal_id"], what="proposal_id")
        if selectors.conversation_get_active(conversation_id=parsed) is None:
            raise NotFound("This conversation does not exist.", code="conversation_not_found")
        task = services.browser_task_start(conversation_id=parsed, proposal_id=proposal_id)
        return Response({"task_id": str(task.id), "status": task.status}, status=status.HTTP_202_ACCEPTED)


class AgentApi(APIView):
    @extend_schema(request=AgentCancelInput, responses={202: OpenApiTypes.OBJECT})
    def delete(self, request: Request) -> Response:
        """Stop the conversation's active turn and its unfinished browser task (404 when neither runs)."""
        body = AgentCancelInput(data=request.data)
        body.is_valid(raise_exception=True)
        conversation_id = parse_uuid(body.validated_data["session_id"], what="session_id")
        if selectors.conversation_get_active(conversation_id=conversation_id) is None:
            raise NotFound("This conversation does not exist.", code="conversation_not_found")
        turn_id = turns.turn_cancel(conversation_id=conversation_id)
        task_id = services.browser_task_cancel(conversation_id=conversation_id)
        if turn_id is None and task_id is None:
            raise NotFound("Nothing of this conversation is unfinished.", code="nothing_unfinished")
        return Response(
            {"turn_id": str(turn_id) if turn_id else None, "task_id": str(task_id) if task_id else None},
            status=status.HTTP_202_ACCEPTED,
        )
