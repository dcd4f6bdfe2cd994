"""What attachments refuse, as errors of the one tree; each has its own `code` for pages to decide by."""

from __future__ import annotations

from flarebot.core.errors import Conflict, FlarebotError, InvalidInput, NotFound, TooLarge


class AttachmentTooLarge(TooLarge):
    """A file, or the files of one message, are larger than Flarebot takes."""

    code = "too_large"


class UnsupportedType(FlarebotError):
    """The file's content is none of the types Flarebot takes (images, PDF, text)."""

    status = 415
    code = "unsupported_type"
    default_message = "This type of file is not supported: attach images, PDFs, text, Markdown, CSV, JSON or code."


class AttachmentInvalid(InvalidInput):
    """A message names attachments that are not this conversation's, were sent already, or are too many."""

    code = "invalid_attachment"


class UploadInvalid(InvalidInput):
    """An upload request is not one multipart file under the field `file`."""

    code = "invalid_upload"


class UploadNameTooLong(InvalidInput):
    """The file's name is too long for the upload's part headers (Django reads at most 1,024 bytes of them)."""

    code = "name_too_long"
    default_message = "The file's name is too long to upload: shorten it (at most 255 characters are kept)."


class AttachmentNotFound(NotFound):
    """No attachment has this id (it never existed, or its conversation was deleted or cleared)."""

    default_message = "There is no such attachment; its conversation may have been cleared or deleted."


class AttachmentSent(Conflict):
    """The attachment went with a message already: only an unsent upload can be removed."""

    code = "attachment_sent"
    default_message = "This file was sent with a message; it goes only with its conversation's history."
