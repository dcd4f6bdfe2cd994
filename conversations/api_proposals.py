"""JSON API of proposed writes: the owner confirms or dismisses what a tainted turn asked to write."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import selectors
from conversations.write_proposals import write_proposal_answer, write_proposals_of
from flarebot.core.api import StrictSerializer, StringField, parse_uuid
from flarebot.core.errors import InvalidInput
from flarebot.core.schema import BODY_STATUSES, described, errors, path_id
from tools.models import WriteProposalState

DECISIONS = {"confirm": True, "dismiss": False}


class WriteProposalDecisionInput(StrictSerializer):
    """The owner's decision: the write is done once, or nothing is written."""

    decision = described({"type": "string", "enum": list(DECISIONS)}, StringField())


WriteProposalOutput = inline_serializer(
    "WriteProposal",
    {
        "id": serializers.UUIDField(),
        "tool": serializers.CharField(),
        "tool_call_id": serializers.CharField(),
        "turn_id": serializers.UUIDField(),
        "state": serializers.ChoiceField(choices=WriteProposalState.choices),
        "readback": inline_serializer(
            "WriteProposalReadback",
            {"title": serializers.CharField(), "lines": serializers.ListField(child=serializers.CharField())},
        ),
        "result": serializers.DictField(allow_null=True),
        "created_at": serializers.DateTimeField(),
        "decided_at": serializers.DateTimeField(allow_null=True),
    },
)
WriteProposalList = inline_serializer(
    "WriteProposalList", {"proposals": serializers.ListField(child=WriteProposalOutput)}
)
WriteProposalDecided = inline_serializer("WriteProposalDecided", {"proposal": WriteProposalOutput})


@extend_schema(parameters=[path_id("conversation_id")])
class WriteProposalListApi(APIView):
    @extend_schema(responses={200: WriteProposalList, **errors(400, 404, e404="`conversation_not_found`.")})
    def get(self, request: Request, conversation_id: str) -> Response:
        parsed = parse_uuid(conversation_id, what="conversation id")
        selectors.conversation_require_active(conversation_id=parsed)
        return Response({"proposals": write_proposals_of(conversation_id=parsed)})


@extend_schema(parameters=[path_id("conversation_id"), path_id("proposal_id")])
class WriteProposalDecisionApi(APIView):
    @extend_schema(
        request=WriteProposalDecisionInput,
        responses={
            200: WriteProposalDecided,
            **errors(
                *BODY_STATUSES,
                404,
                409,
                e400="`invalid_decision`, or an id that is not one.",
                e404="`conversation_not_found`, `proposal_not_found`.",
                e409="`proposal_confirmed`, `proposal_dismissed`: it was decided already.",
            ),
        },
    )
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
