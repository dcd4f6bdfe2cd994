"""JSON API of attachments: upload one file (to a conversation, or to none yet in a new chat), serve it
back to the owner, and remove one that was not sent."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from attachments import selectors, services
from attachments.errors import UploadInvalid, UploadNameTooLong
from attachments.limits import FILE_MAX
from attachments.models import IMAGE_TYPES, Attachment, MediaType
from attachments.storage import blob_path, download_name
from attachments.uploads import FIELD, AttachmentUploadHandler, Upload
from flarebot.core.api import parse_uuid
from flarebot.core.schema import errors, path_id

# Served files run nothing: no script, no plugin, no form, no navigation of their own.
SANDBOX = "sandbox; default-src 'none'"

AttachmentOutput = inline_serializer(
    "Attachment",
    {
        "id": serializers.UUIDField(),
        "name": serializers.CharField(help_text="As given, without any path or control characters; at most 255."),
        "media_type": serializers.ChoiceField(choices=MediaType.choices, help_text="Decided from the content."),
        "size": serializers.IntegerField(min_value=1, max_value=FILE_MAX),
        "sha256": serializers.CharField(),
    },
)
UploadInput = inline_serializer("AttachmentUpload", {FIELD: serializers.FileField()})


def attachment_json(attachment: Attachment) -> dict[str, Any]:
    return {
        "id": str(attachment.id),
        "name": attachment.name,
        "media_type": attachment.media_type,
        "size": attachment.size,
        "sha256": attachment.sha256,
    }


TYPES = (
    "The type is decided from the content: PNG, JPEG, GIF, WebP, PDF, and UTF-8 text (Markdown, CSV and JSON by "
    "their name; JSON must parse). Refused early, before the body is read whole."
)
UPLOAD_ERRORS = {
    "e400": "`invalid_upload`: not one file in the field `file`; `name_too_long`: a name too long to read.",
    "e413": f"`too_large`: over {FILE_MAX:,} bytes.",
    "e415": "`unsupported_type`: HTML, SVG, XML, binary or empty content.",
}


@extend_schema(parameters=[path_id("conversation_id")])
class AttachmentUploadApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": UploadInput},
        description=f"Upload one file (multipart field `file`) to the conversation; send its id with a message. "
        f"{TYPES}",
        responses={201: AttachmentOutput, **errors(400, 404, 413, 415, **UPLOAD_ERRORS)},
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        return _upload(request, conversation_id=parse_uuid(conversation_id, what="conversation id"))


class UnsentUploadApi(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": UploadInput},
        description=(
            "Upload one file (multipart field `file`) before its conversation exists (a new chat): the first "
            "message that names it, in any conversation, claims it. One never sent is removed after a day. "
            f"{TYPES}"
        ),
        responses={201: AttachmentOutput, **errors(400, 413, 415, **UPLOAD_ERRORS)},
    )
    def post(self, request: Request) -> Response:
        return _upload(request, conversation_id=None)


def _upload(request: Request, *, conversation_id: uuid.UUID | None) -> Response:
    handler = AttachmentUploadHandler(request._request)
    request._request.upload_handlers = [handler]
    try:
        files = _files(request)
        uploads = files.getlist(FIELD)
        if len(uploads) != 1 or len(files) != 1 or set(request.data) - {FIELD}:
            raise UploadInvalid("Send one file, in the multipart field `file`.")
        upload = uploads[0]
        assert isinstance(upload, Upload)
    except BaseException:
        handler.discard()
        raise
    attachment = services.attachment_create(conversation_id=conversation_id, upload=upload)
    return Response(attachment_json(attachment), status=status.HTTP_201_CREATED)


def _files(request: Request) -> Any:
    """The request's files; a part whose headers Django will not read names its real problem."""
    try:
        return request.FILES
    except exceptions.ParseError as error:
        # django.http.multipartparser: a part's headers over MAX_TOTAL_HEADER_SIZE (1,024
        # bytes), which only a long file name reaches.
        if "header size" in str(error.detail):
            raise UploadNameTooLong() from None
        raise


@extend_schema(parameters=[path_id("attachment_id")])
class AttachmentDetailApi(APIView):
    @extend_schema(
        description=(
            "The file, to the owner's session only: `Content-Disposition: attachment` (images `inline`, their type "
            "confirmed from the content), `X-Content-Type-Options: nosniff` and a sandboxing CSP. The filename ends "
            "in an extension of the served type (`page.html` served as text downloads as `page.html.txt`)."
        ),
        responses={
            **{(200, media_type): OpenApiResponse(OpenApiTypes.BINARY) for media_type in MediaType.values},
            **errors(400, 404),
        },
    )
    def get(self, request: Request, attachment_id: str) -> FileResponse:
        attachment = selectors.attachment_get(attachment_id=parse_uuid(attachment_id, what="attachment id"))
        content_type = attachment.media_type
        if content_type.startswith("text/") or content_type == MediaType.JSON:
            content_type += "; charset=utf-8"
        response = FileResponse(
            blob_path(attachment.sha256).open("rb"),
            as_attachment=attachment.media_type not in IMAGE_TYPES,
            filename=download_name(attachment.name, attachment.media_type),
            content_type=content_type,
        )
        response["X-Content-Type-Options"] = "nosniff"
        response["Content-Security-Policy"] = SANDBOX
        return response

    @extend_schema(
        request=None,
        description=(
            "Remove a file that was not sent with a message (the owner removed it from the message box), and its "
            "stored content unless another attachment has the same."
        ),
        responses={
            204: None,
            **errors(400, 404, 409, e409="`attachment_sent`: it went with a message; it goes with the history."),
        },
    )
    def delete(self, request: Request, attachment_id: str) -> Response:
        services.attachment_discard(attachment_id=parse_uuid(attachment_id, what="attachment id"))
        return Response(status=status.HTTP_204_NO_CONTENT)
