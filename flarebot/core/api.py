"""What every JSON API view shares: owner authentication, strict bodies, the error shape."""

from __future__ import annotations

import re
import uuid
from typing import IO, Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, serializers
from rest_framework.parsers import JSONParser
from rest_framework.response import Response

from flarebot.core.errors import FlarebotError, InvalidInput, error_body
from flarebot.core.ids import uuid_parse
from flarebot.core.json_input import JsonRefused, json_parse
from flarebot.core.rows import MAX_VERSION

_DRF_CODES = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "not_authenticated",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.ParseError: "invalid_json",
    exceptions.Throttled: "limit_reached",
}


def _first_message(detail: Any, prefix: str = "") -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            label = "" if key == "non_field_errors" else f"{key}: "
            return _first_message(value, prefix + label)
    if isinstance(detail, list) and detail:
        return _first_message(detail[0], prefix)
    return f"{prefix}{detail}"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map every error to `{"error": {"code", "message"}}` with a fitting status."""
    if isinstance(exc, FlarebotError):
        return Response(error_body(exc.code, exc.message, exc.extra), status=exc.status)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("too_large", "The request body is too large."), status=413)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "Not found."), status=404)
    if isinstance(exc, exceptions.ValidationError):
        message = _first_message(exc.detail)[:500]
        body = error_body("invalid", message)
        if isinstance(exc.detail, dict):
            body["error"]["fields"] = exc.detail
        return Response(body, status=400)
    if isinstance(exc, exceptions.APIException):
        code = next((c for kind, c in _DRF_CODES.items() if isinstance(exc, kind)), "error")
        message = str(exc.detail)[:500] if code != "invalid_json" else "The body must be valid JSON."
        response = Response(error_body(code, message), status=exc.status_code)
        wait = getattr(exc, "wait", None)
        if isinstance(exc, exceptions.Throttled) and wait:
            response["Retry-After"] = str(int(wait))
        return response
    return None


class StrictJSONParser(JSONParser):
    """DRF's JSON parser, refusing what `json_parse` refuses (deep nesting, lone surrogates)."""

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return json_parse(stream.read().decode("utf-8"))
        except (JsonRefused, UnicodeDecodeError):
            raise exceptions.ParseError("The body must be valid JSON.") from None


class StrictSerializer(serializers.Serializer):
    """A serializer that rejects a body that is not an object or has fields it does not name."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise exceptions.ValidationError({"non_field_errors": ["The body must be a JSON object."]})
        unknown = sorted(set(data) - set(self.fields))
        if unknown:
            raise exceptions.ValidationError({name: ["This field is not allowed."] for name in unknown})
        return super().to_internal_value(data)


def parse_uuid(value: str, *, what: str = "id") -> uuid.UUID:
    """Parse a canonical (hyphenated, any case) UUID from a path or body, or raise 400."""
    parsed = uuid_parse(value)
    if parsed is None:
        raise InvalidInput(f"The {what} is not a valid UUID.", code="invalid_id")
    return parsed


@extend_schema_field(OpenApiTypes.STR)
class StringField(serializers.Field):
    """A JSON string, taken as it is: no coercion of numbers, no trimming."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> str:
        return str(value)


def number_message(name: str, high: int) -> str:
    """What a refused whole number is told, for a body field or a query parameter alike."""
    return f"{name}: a whole number from 1 to {high}."


def version_message(name: str) -> str:
    """What a refused version is told, for a body field or a query parameter alike."""
    return number_message(name, MAX_VERSION)


_WHOLE_NUMBER = re.compile(r"^[1-9][0-9]{0,9}$")


def number_parse(value: str | None, *, what: str, high: int, code: str) -> int:
    """Parse a query parameter's whole number from 1 to `high` (ASCII digits, no sign or leading zero), or 400."""
    if value is None or not _WHOLE_NUMBER.match(value) or int(value) > high:
        raise InvalidInput(number_message(what, high), code=code)
    return int(value)


@extend_schema_field(OpenApiTypes.INT)
class VersionField(serializers.Field):
    """A JSON integer version from 1 to MAX_VERSION: no strings, booleans or fractions."""

    def __init__(self, *, name: str = "version", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error_messages["invalid"] = version_message(name)

    def to_internal_value(self, data: Any) -> int:
        if type(data) is not int or not 1 <= data <= MAX_VERSION:
            self.fail("invalid")
        return data

    def to_representation(self, value: Any) -> int:
        return int(value)
