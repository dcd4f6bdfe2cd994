"""The limits of attachments, each said once; pages read them from the server."""

from __future__ import annotations

from datetime import timedelta

FILE_MAX = 20 * 1024 * 1024  # bytes per file
MESSAGE_FILES_MAX = 10  # files per message
MESSAGE_BYTES_MAX = 100 * 1024 * 1024  # bytes of all files of one message
# A file uploaded in a new chat and never sent (its page was closed) is swept after this.
UNSENT_MAX_AGE = timedelta(days=1)
# What reaches the model inline; the rest through read_attachment.
PDF_PAGES_INLINE = 20
TEXT_CHARS_INLINE = 100_000
# read_attachment's page of text.
READ_LENGTH_DEFAULT = 20_000
READ_LENGTH_MAX = 50_000


def too_large_message() -> str:
    """Return the message of a file over the per-file limit."""
    return f"A file may be at most {FILE_MAX // (1024 * 1024)} MB."
