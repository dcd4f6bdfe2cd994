"""JSON API of the settings pages that spans every app: the System section."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

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
