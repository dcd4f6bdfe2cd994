"""JSON API of the pages that spans every app: the System section, the needs-you list."""

from __future__ import annotations

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from flarebot.core.account import owner_password_change
from flarebot.core.api import StrictSerializer, StringField
from flarebot.core.schema import BODY_STATUSES, errors
from settings_ui.selectors import ATTENTION_MAX, attention_items
from settings_ui.system import system_status

SystemOutput = inline_serializer(
    "System",
    {
        "components": serializers.ListField(
            child=inline_serializer(
                "SystemComponent",
                {
                    "name": serializers.CharField(),
                    "label": serializers.CharField(),
                    "state": serializers.ChoiceField(choices=["ok", "missing", "error", "unknown"]),
                    "detail": serializers.CharField(allow_blank=True),
                    "fix": serializers.CharField(allow_null=True),
                },
            )
        )
    },
)


class SystemApi(APIView):
    @extend_schema(responses={200: SystemOutput})
    def get(self, request: Request) -> Response:
        return Response({"components": system_status()})


class PasswordChangeInput(StrictSerializer):
    """The owner's current password and the new one (Django's validators apply)."""

    current_password = StringField()
    new_password = StringField()


class PasswordChangeApi(APIView):
    @extend_schema(
        request=PasswordChangeInput,
        responses={
            204: None,
            **errors(
                *BODY_STATUSES,
                429,
                e400="`wrong_password` (the current one is not right), `invalid_password` (what the validators say).",
                e429="`signin_throttled`: too many wrong passwords (they count as failed sign-ins).",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        """Change the owner's password: this session stays signed in, every other one ends."""
        body = PasswordChangeInput(data=request.data)
        body.is_valid(raise_exception=True)
        # The owner's session middleware admitted only the owner's (a User) to /api/.
        assert isinstance(request.user, User)
        owner_password_change(
            request=request._request,  # Django's own request: its client address and session
            user=request.user,
            current=body.validated_data["current_password"],
            new=body.validated_data["new_password"],
        )
        return Response(status=204)


ATTENTION_KINDS = [
    "critical_point",
    "sign_in",
    "email_consent",
    "browser_task_proposal",
    "task_run_failed",
    "task_run_missed",
    "tool_unavailable",
]
AttentionOutput = inline_serializer(
    "Attention",
    {
        "items": serializers.ListField(
            child=inline_serializer(
                "AttentionItem",
                {
                    "kind": serializers.ChoiceField(choices=ATTENTION_KINDS),
                    "conversation_id": serializers.UUIDField(),
                    "conversation_name": serializers.CharField(),
                    "title": serializers.CharField(),
                    "created_at": serializers.DateTimeField(),
                    "path": serializers.CharField(help_text="The chat page at the entry's card: `/?c=<id>#...`."),
                },
            ),
            max_length=ATTENTION_MAX,
        )
    },
)


class AttentionApi(APIView):
    @extend_schema(
        operation_id="attention_list",
        description=(
            "An addition: what waits for the owner across conversations, newest first, at most 100. Sockets "
            "receive `attention_changed` when it may have changed."
        ),
        responses={200: AttentionOutput},
    )
    def get(self, request: Request) -> Response:
        return Response({"items": attention_items()})
