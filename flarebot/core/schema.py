"""OpenAPI description of the API, for the schema at /api/schema/ (drf-spectacular).

What every operation shares is declared here once: the owner's session, the error shape
`{"error": {"code", "message", ...}}`, the refusals any /api/ route may answer (401, 403
and 503 come from the middleware, before a view runs), strict request bodies
(`additionalProperties: false`, as `StrictSerializer` refuses unknown fields), and the text
rules of the contract as JSON Schema. Views name only their own answers, with `errors()`.

JSON Schema counts `maxLength` in code points where the contract counts UTF-16 code units,
so a text of characters outside the BMP may be refused below its `maxLength`; each such
field says so.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema_field, inline_serializer
from rest_framework import serializers

from flarebot.core.text import DISGUISING_CHARACTERS

FieldT = TypeVar("FieldT", bound=serializers.Field)

LOWERCASE_UUID = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"

# Control characters (Unicode category Cc), as regular expression class ranges.
CONTROLS = r"\x00-\x1f\x7f-\x9f"
# The controls of a text that may span lines: all but tab, LF and CR (a CR is stored as LF).
LINE_TEXT_CONTROLS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
# Not blank means a character `str.strip()` keeps: it also strips these, which `\s` of
# JSON Schema's regular expressions does not name (U+FEFF is the other way round).
_BLANK_EXTRA = r"\x1c-\x1f\x85\ufeff"
DISGUISING = "".join(f"\\u{ord(ch):04x}" for ch in sorted(DISGUISING_CHARACTERS))


# The contract's error shape; an error may carry more fields beside these.
ErrorOutput = inline_serializer(
    "Error",
    {
        "error": inline_serializer(
            "ErrorDetail",
            {
                "code": serializers.CharField(help_text="What went wrong, for a program to decide by."),
                "message": serializers.CharField(max_length=500, help_text="What went wrong, for a person to read."),
                "fields": serializers.DictField(
                    child=serializers.ListField(child=serializers.CharField()),
                    required=False,
                    help_text="An invalid body's messages by field (`invalid`).",
                ),
                "current": serializers.DictField(
                    required=False,
                    help_text="What a stale request conflicted with, as it is now (`version_conflict`).",
                ),
            },
        )
    },
)


ERROR_DESCRIPTIONS = {
    400: "Invalid input: `invalid` (a body field, named in `fields`), `invalid_json`, or the operation's own code.",
    401: "No valid owner session: `not_authenticated`, or `duplicate_cookie`.",
    403: "A foreign Origin, or an unsafe method without Flarebot's own (`origin_refused`); "
    "a session that is not the owner's (`not_owner`).",
    404: "Unknown, or deleted: `not_found` or the operation's own code.",
    409: "Based on a stale version, or reusing an id differently.",
    413: f"The body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes (`too_large`).",
    415: "The body is not JSON (`unsupported_media_type`).",
    429: "A count limit is reached.",
    502: "A model provider could not be asked, or gave nothing usable; `message` says which.",
    503: "The installation is missing or no longer matches its owner (`installation_unavailable`).",
}
# What the middleware answers before any view runs: no session, a foreign origin, a broken installation.
GUARD_STATUSES = (401, 403, 503)
# What reading a JSON body may answer, before the view looks at it.
BODY_STATUSES = (400, 413, 415)


def errors(*statuses: int, **described: str) -> dict[int, OpenApiResponse]:
    """Return error responses in the contract's shape; `described` overrides a status's text (`e409=...`)."""
    texts = {int(key.removeprefix("e")): text for key, text in described.items()}
    return {
        status: OpenApiResponse(ErrorOutput, description=texts.get(status, ERROR_DESCRIPTIONS[status]))
        for status in sorted({*statuses, *texts})
    }


def text_rule(
    *, max_utf16: int, refused: str = CONTROLS, disguising: bool = False, description: str = ""
) -> dict[str, Any]:
    """A text's JSON Schema: not blank, never a character of `refused` (a regex class body) or a disguising one."""
    bad = refused + (DISGUISING if disguising else "")
    allowed = f"[^{bad}]" if bad else r"[\s\S]"
    pattern = f"^{allowed}*[^\\s{bad}{_BLANK_EXTRA}]{allowed}*$"
    units = f"At most {max_utf16:,} UTF-16 code units (a character outside the BMP counts 2)."
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": max_utf16,
        "pattern": pattern,
        "description": f"{description} {units}".strip(),
    }


def uuid_schema(*, lowercase: bool) -> dict[str, Any]:
    """A UUID in canonical form; `lowercase` where the operation refuses upper case."""
    if lowercase:
        return {"type": "string", "format": "uuid", "pattern": LOWERCASE_UUID}
    return {"type": "string", "format": "uuid"}


def path_id(name: str, *, lowercase: bool = False) -> OpenApiParameter:
    """A path parameter holding a UUID (any case, or lowercase only)."""
    return OpenApiParameter(name, uuid_schema(lowercase=lowercase), OpenApiParameter.PATH)


def whole_number(low: int, high: int) -> dict[str, Any]:
    """A query number: ASCII digits, no sign, no leading zero."""
    return {"type": "integer", "minimum": low, "maximum": high}


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's schema, with the middleware's refusals added to every operation."""

    def _get_request_body(self, direction: Any = "request") -> Any:
        # drf-spectacular describes the bodies of PUT, PATCH and POST only; a DELETE that
        # declares a body (`DELETE /api/agent/`) takes one too.
        if self.method != "DELETE" or self.get_request_serializer() is None:
            return super()._get_request_body(direction)
        self.method = "POST"
        try:
            return super()._get_request_body(direction)
        finally:
            self.method = "DELETE"

    # `@extend_schema(responses=...)` replaces get_response_serializers in a subclass, so the
    # refusals are added where the responses are built (a method drf-spectacular's own
    # extensions override too).
    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        bodies: dict[str, Any] = super()._get_response_bodies(direction)
        for status, response in errors(*GUARD_STATUSES).items():
            bodies.setdefault(str(status), self._get_response_for_code(response, str(status), direction=direction))
        return bodies


class OwnerSessionScheme(OpenApiAuthenticationExtension):
    target_class = "flarebot.core.api_auth.OwnerSessionAuthentication"
    name = "ownerSession"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME}


class StrictBodyScheme(OpenApiSerializerExtension):
    """A StrictSerializer names every field a body may have."""

    target_class = "flarebot.core.api.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_basic_serializer(self.target, direction)
        schema["additionalProperties"] = False
        # Its own docstring describes a body; StrictSerializer's (inherited) would not.
        target = self.target if isinstance(self.target, type) else type(self.target)
        if "__doc__" not in vars(target) or not target.__doc__:
            schema.pop("description", None)
        return schema


def list_of(serializer: serializers.BaseSerializer, **kwargs: Any) -> serializers.ListField:
    """A list of an (inline) serializer's objects; a fresh child, as a ListField binds the one it gets."""
    return serializers.ListField(child=type(serializer)(), **kwargs)


def described(schema: dict[str, Any], field: FieldT) -> FieldT:
    """Give a body field the JSON Schema of what its service accepts.

    The schema goes on a subclass: a serializer deep-copies its fields by constructing them again.
    """
    kind = extend_schema_field(schema)(type(type(field).__name__, (type(field),), {"__module__": __name__}))
    return kind(*field._args, **field._kwargs)  # type: ignore[attr-defined]
