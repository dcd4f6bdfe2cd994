"""JSON API of the shared settings: model, provider keys and instructions."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import instructions, model_settings
from conversations.providers.catalog import KEYED_PROVIDERS, catalog
from flarebot.core.api import StrictSerializer, StringField
from flarebot.core.errors import InvalidInput
from flarebot.core.schema import BODY_STATUSES, LINE_TEXT_CONTROLS, described, errors, text_rule

KEY = {
    "type": "string",
    "pattern": f"^[!-~]{{{model_settings.KEY_MIN},{model_settings.KEY_MAX}}}$",
    "description": "Printable ASCII without whitespace.",
}
INSTRUCTIONS = text_rule(
    max_utf16=instructions.MAX_UTF16,
    refused=LINE_TEXT_CONTROLS,
    description="Tabs and line breaks are the only control characters.",
)


class ModelInput(StrictSerializer):
    """A provider and one of its models, as the catalog lists them."""

    provider = StringField()
    model = StringField()


class KeyInput(StrictSerializer):
    """A provider's API key."""

    key = described(KEY, StringField())


class InstructionsInput(StrictSerializer):
    """The owner's instructions, kept exactly as given."""

    text = described(INSTRUCTIONS, StringField())


class ModelInputScheme(OpenApiSerializerExtension):
    """A model body names a provider and a model of that provider's catalog (read when the schema is made)."""

    target_class = ModelInput
    priority = 1  # before StrictBodyScheme, which matches every StrictSerializer

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        offered = {provider: models for provider, models in catalog().items() if models}
        return {
            "type": "object",
            "description": "A provider and one of its own models in the catalog.",
            "properties": {"provider": {"type": "string", "enum": list(offered)}, "model": {"type": "string"}},
            "required": ["provider", "model"],
            "additionalProperties": False,
            "oneOf": [
                {"properties": {"provider": {"enum": [provider]}, "model": {"enum": models}}}
                for provider, models in offered.items()
            ],
        }


SettingsOutput = inline_serializer(
    "ModelSettings",
    {
        "configuration": inline_serializer(
            "ModelConfiguration",
            {
                "provider": serializers.CharField(),
                "model": serializers.CharField(),
                "available": serializers.BooleanField(help_text="False when the choice left the catalog."),
            },
        ),
        "credentials": inline_serializer(
            "ProviderCredentials",
            {p: serializers.ChoiceField(choices=["configured", "missing"]) for p in KEYED_PROVIDERS},
        ),
        "verification": inline_serializer(
            "ProviderKeyVerification",
            {
                p: serializers.ChoiceField(choices=["verified", "not_verified", "unreadable"], allow_null=True)
                for p in KEYED_PROVIDERS
            },
        ),
        "unchecked_reasons": inline_serializer(
            "ProviderKeyUncheckedReasons",
            {p: serializers.CharField(allow_null=True) for p in KEYED_PROVIDERS},
        ),
    },
)
CatalogOutput = inline_serializer(
    "ModelCatalog",
    {
        "providers": inline_serializer(
            "ModelCatalogProviders",
            {p: serializers.ListField(child=serializers.CharField()) for p in ("anthropic", "openai", "local")},
        )
    },
)
InstructionsOutput = inline_serializer(
    "Instructions",
    {
        "effective": serializers.CharField(),
        "default": serializers.CharField(),
        "customized": serializers.BooleanField(),
        "modified_at": serializers.DateTimeField(allow_null=True),
        "rules": serializers.CharField(help_text="What the model always receives after the instructions."),
    },
)
PROVIDER = OpenApiParameter(
    "provider",
    {"type": "string", "enum": list(KEYED_PROVIDERS)},
    OpenApiParameter.PATH,
    description="Any other provider is 400 `invalid_provider`.",
)


def _no_body(request: Request) -> None:
    if request.data not in ({}, None):
        raise InvalidInput("This request takes no body.", code="invalid")


class ModelSettingsApi(APIView):
    @extend_schema(responses={200: SettingsOutput})
    def get(self, request: Request) -> Response:
        return Response(model_settings.model_settings_get())

    @extend_schema(
        request=ModelInput,
        responses={200: SettingsOutput, **errors(*BODY_STATUSES, e400="`invalid_model`: not in the catalog.")},
    )
    def put(self, request: Request) -> Response:
        body = ModelInput(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(model_settings.model_configuration_set(**body.validated_data))


class ModelCatalogApi(APIView):
    @extend_schema(responses={200: CatalogOutput})
    def get(self, request: Request) -> Response:
        return Response({"providers": catalog()})


@extend_schema(parameters=[PROVIDER])
class ProviderKeyApi(APIView):
    @extend_schema(
        request=KeyInput,
        description="Saves the key unless the provider refuses it (an unreachable provider leaves it not verified).",
        responses={
            200: SettingsOutput,
            **errors(*BODY_STATUSES, 404, e400="`invalid_provider`, `invalid_key`, `key_refused`."),
        },
    )
    def put(self, request: Request, provider: str) -> Response:
        body = KeyInput(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(model_settings.provider_key_set(provider=provider, key=body.validated_data["key"]))

    @extend_schema(
        request=None, responses={200: SettingsOutput, **errors(*BODY_STATUSES, 404, e400="`invalid_provider`.")}
    )
    def delete(self, request: Request, provider: str) -> Response:
        _no_body(request)
        return Response(model_settings.provider_key_delete(provider=provider))


class InstructionsApi(APIView):
    @extend_schema(responses={200: InstructionsOutput})
    def get(self, request: Request) -> Response:
        return Response(instructions.instructions_get())

    @extend_schema(
        request=InstructionsInput,
        responses={200: InstructionsOutput, **errors(*BODY_STATUSES, e400="`invalid_instructions`.")},
    )
    def put(self, request: Request) -> Response:
        body = InstructionsInput(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(instructions.instructions_set(text=body.validated_data["text"]))

    @extend_schema(
        request=None,
        description="Back to the shipped default.",
        responses={200: InstructionsOutput, **errors(*BODY_STATUSES)},
    )
    def delete(self, request: Request) -> Response:
        _no_body(request)
        return Response(instructions.instructions_reset())
