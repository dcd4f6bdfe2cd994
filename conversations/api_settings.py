"""JSON API of the shared settings: model, provider keys and instructions."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import instructions, model_settings
from conversations.providers.catalog import catalog
from flarebot.core.api import StrictSerializer, StringField
from flarebot.core.errors import InvalidInput


class ModelInput(StrictSerializer):
    provider = StringField()
    model = StringField()


class KeyInput(StrictSerializer):
    key = StringField()


class InstructionsInput(StrictSerializer):
    text = StringField()


def _no_body(request: Request) -> None:
    if request.data not in ({}, None):
        raise InvalidInput("This request takes no body.", code="invalid")


class ModelSettingsApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(model_settings.model_settings_get())

    @extend_schema(request=ModelInput, responses={200: OpenApiTypes.OBJECT})
    def put(self, request: Request) -> Response:
        body = ModelInput(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(model_settings.model_configuration_set(**body.validated_data))


class ModelCatalogApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response({"providers": catalog()})


class ProviderKeyApi(APIView):
    @extend_schema(request=KeyInput, responses={200: OpenApiTypes.OBJECT})
    def put(self, request: Request, provider: str) -> Response:
        body = KeyInput(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(model_settings.provider_key_set(provider=provider, key=body.validated_data["key"]))

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def delete(self, request: Request, provider: str) -> Response:
        _no_body(request)
        return Response(model_settings.provider_key_delete(provider=provider))


class InstructionsApi(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        return Response(instructions.instructions_get())

    @extend_schema(request=InstructionsInput, responses={200: OpenApiTypes.OBJECT})
    def put(self, request: Request) -> Response:
        body = InstructionsInput(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(instructions.instructions_set(text=body.validated_data["text"]))

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    def delete(self, request: Request) -> Response:
        _no_body(request)
        return Response(instructions.instructions_reset())
