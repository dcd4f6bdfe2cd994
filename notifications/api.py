"""JSON API of notifications (PROTOCOL.md "Notifications"): destinations, their test, the settings.

A destination's URL is accepted here and never answered back: every answer shows it masked.
Bad input is refused in the contract's error shape and changes nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from flarebot.core.api import StrictSerializer
from flarebot.core.errors import InvalidInput
from flarebot.core.ids import uuid_parse
from flarebot.core.schema import BODY_STATUSES, LINE_TEXT_CONTROLS, described, errors, list_of, path_id, text_rule
from notifications import selectors, services
from notifications.models import Kind


@extend_schema_field(OpenApiTypes.ANY)
class AnyField(serializers.Field):
    """Any JSON value, checked by the service (which says what is wrong in words)."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


def destination_id_parse(value: str) -> uuid.UUID:
    """Parse a destination id: a UUID in lowercase canonical form, or 400."""
    parsed = uuid_parse(value, lowercase=True)
    if parsed is None:
        raise InvalidInput("The id is not a valid destination id (a lowercase UUID).", code="invalid_id")
    return parsed


def _no_body(request: Request) -> None:
    if request.data not in ({}, None):
        raise InvalidInput("This request takes no body.", code="invalid")


LABEL = {
    **text_rule(max_utf16=services.LABEL_MAX, refused=LINE_TEXT_CONTROLS + r"\t\n\r", disguising=True),
    "example": "Phone",
}
URL = {
    "type": "string",
    "minLength": 1,
    "maxLength": services.URL_MAX,
    "pattern": r"^[^\s\x00-\x1f\x7f-\x9f]+$",
    "example": "ntfy://ntfy.example.com/flarebot",
    "description": "An Apprise URL (ntfy://, json://, mailto://, tgram://, ...): refused unless Apprise can parse it. "
    "It carries credentials: it is stored sealed and never shown again, only masked.",
}
CLOCK = {"type": ["string", "null"], "pattern": r"^([01][0-9]|2[0-3]):[0-5][0-9]$"}
KINDS = {
    "type": "object",
    "properties": {name: {"type": "boolean"} for name in services.KINDS},
    "required": list(services.KINDS),
    "additionalProperties": False,
    "example": {
        "needs_answer": True,
        "proposal": True,
        "run_failed": True,
        "browser_finished": True,
        "run_completed": False,
    },
}
QUIET = {
    "type": "object",
    "properties": {
        "enabled": {"type": "boolean"},
        "start": CLOCK,
        "end": CLOCK,
        "time_zone": {"type": "string", "minLength": 1, "maxLength": 64, "description": "An IANA time zone."},
    },
    "required": ["enabled", "start", "end", "time_zone"],
    "additionalProperties": False,
    "example": {"enabled": True, "start": "22:00", "end": "07:00", "time_zone": "Europe/Berlin"},
    "description": "When enabled, start and end (HH:MM, different) in the time zone: every kind but "
    "`needs_answer` waits until the end, then goes as one summary per destination.",
}


class DestinationInput(StrictSerializer):
    """A new destination: an Apprise URL and the owner's label for it."""

    url = described(URL, AnyField())
    label = described(LABEL, AnyField())  # type: ignore[assignment]  # a body field, not the serializer's label


class SettingsInput(StrictSerializer):
    """The kinds the owner wants told, and the quiet hours."""

    kinds = described(KINDS, AnyField())
    quiet_hours = described(QUIET, AnyField())


DestinationOutput = inline_serializer(
    "NotificationDestination",
    {
        "id": serializers.UUIDField(),
        "label": serializers.CharField(),
        "url": serializers.CharField(help_text="Masked: the service's scheme only, never the URL."),
        "created_at": serializers.DateTimeField(allow_null=True),
    },
)
LimitsOutput = inline_serializer(
    "NotificationLimits",
    {
        "max_destinations": serializers.IntegerField(),
        "label_max": serializers.IntegerField(),
        "url_max": serializers.IntegerField(),
    },
)
DestinationListOutput = inline_serializer(
    "NotificationDestinationList",
    {
        "destinations": list_of(DestinationOutput, max_length=services.MAX_DESTINATIONS),
        "limits": LimitsOutput,
    },
)
TestOutput = inline_serializer(
    "NotificationTest",
    {"ok": serializers.BooleanField(), "message": serializers.CharField()},
)
FailureOutput = inline_serializer(
    "NotificationFailure",
    {
        "id": serializers.UUIDField(),
        "destination_id": serializers.UUIDField(),
        "destination_label": serializers.CharField(),
        "kind": serializers.ChoiceField(choices=Kind.choices),
        "title": serializers.CharField(),
        "error": serializers.CharField(allow_blank=True),
        "attempts": serializers.IntegerField(min_value=0),
        "failed_at": serializers.DateTimeField(allow_null=True),
    },
)
SettingsOutput = inline_serializer(
    "NotificationSettings",
    {
        "kinds": described(KINDS, serializers.DictField()),
        "quiet_hours": described(QUIET, serializers.DictField()),
        "failures": list_of(FailureOutput, max_length=selectors.FAILURES_SHOWN),
    },
)
NOT_FOUND = errors(404, e404="`not_found`: no such destination (or it was deleted).")


class DestinationListApi(APIView):
    @extend_schema(operation_id="notification_destinations_list", responses={200: DestinationListOutput})
    def get(self, request: Request) -> Response:
        return Response({"destinations": selectors.destination_list(), "limits": selectors.limits()})

    @extend_schema(
        operation_id="notification_destinations_create",
        request=DestinationInput,
        responses={
            201: DestinationOutput,
            **errors(
                *BODY_STATUSES,
                429,
                e400="`invalid_url` (Apprise cannot parse it), `invalid_destination` (`fields` names the field), "
                "or `invalid` (a body field).",
                e429="`destinations_full`: delete a destination to add another.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        body = DestinationInput(data=request.data)
        body.is_valid(raise_exception=True)
        destination = services.destination_create(**body.validated_data)
        return Response(selectors.destination_view(destination), status=status.HTTP_201_CREATED)


@extend_schema(parameters=[path_id("destination_id", lowercase=True)])
class DestinationDetailApi(APIView):
    @extend_schema(
        request=None,
        description="Deletes the destination and what was still to be sent to it; also 204 for a valid id that "
        "does not exist.",
        responses={204: None, **errors(*BODY_STATUSES, e400="`invalid_id`.")},
    )
    def delete(self, request: Request, destination_id: str) -> Response:
        parsed = destination_id_parse(destination_id)
        _no_body(request)
        services.destination_delete(destination_id=parsed)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(parameters=[path_id("destination_id", lowercase=True)])
class DestinationTestApi(APIView):
    @extend_schema(
        request=None,
        description="Sends a test message to the destination now, within the send's time bound, and says how it "
        "went: `ok` false with a safe `message` when the destination refused it or could not be reached.",
        responses={200: TestOutput, **errors(*BODY_STATUSES, e400="`invalid_id`."), **NOT_FOUND},
    )
    def post(self, request: Request, destination_id: str) -> Response:
        parsed = destination_id_parse(destination_id)
        _no_body(request)
        outcome = services.destination_test(destination_id=parsed)
        return Response({"ok": outcome.ok, "message": outcome.message})


class SettingsApi(APIView):
    @extend_schema(operation_id="notification_settings_get", responses={200: SettingsOutput})
    def get(self, request: Request) -> Response:
        return Response(selectors.settings_view())

    @extend_schema(
        operation_id="notification_settings_put",
        request=SettingsInput,
        examples=[
            OpenApiExample(
                "Quiet nights",
                request_only=True,
                value={"kinds": KINDS["example"], "quiet_hours": QUIET["example"]},
            )
        ],
        responses={
            200: SettingsOutput,
            **errors(*BODY_STATUSES, e400="`invalid_settings` (`fields` names the field), or `invalid`."),
        },
    )
    def put(self, request: Request) -> Response:
        body = SettingsInput(data=request.data)
        body.is_valid(raise_exception=True)
        row = services.settings_update(**body.validated_data)
        return Response(selectors.settings_view(row))
