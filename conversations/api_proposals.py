"""JSON API of proposed writes: the owner confirms or dismisses what a tainted turn asked to write."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import selectors
from conversations.write_proposals import write_proposal_answer, write_proposals_of
from flarebot.core.api import StrictSerializer, StringField, parse_uuid
from flarebot.core.errors import InvalidInput, NotFound

DECISIONS = {"confirm": True, "dismiss": False}


class WriteProposalDecisionInput(StrictSerializer):
    decision = StringField()


class WriteProposalListApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        if selectors.conversation_get_active(conversation_id=parsed) is None:
            raise NotFound("This conversation does not exist.", code="conversation_not_found")
        return Response({"proposals": write_proposals_of(conversation_id=parsed)})


class WriteProposalDecisionApi(APIView):
    @extend_schema(request=WriteProposalDecisionInput, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, conversation_id: str, proposal_id: str) -> Response:
        """Confirm (the write is done, once) or dismiss (nothing is written) a proposed write."""
        conversation = parse_uuid(conversation_id, what="conversation id")
        proposal = parse_uuid(proposal_id, what="proposal id")
        body = WriteProposalDecisionInput(data=request.data)
        body.is_valid(raise_exception=True)
        decision = body.validated_data["decision"]
        if decision not in DECISIONS:
            raise InvalidInput('decision must be "confirm" or "dismiss".', code="invalid_decision")
        shown = write_proposal_answer(conversation_id=conversation, proposal_id=proposal, confirm=DECISIONS[decision])
        return Response({"proposal": shown})
