"""The upload handler that streams one multipart file to a temporary blob, refusing early.

Django hands the body over in chunks; this handler never keeps a file in memory. It
refuses before reading the body when the declared length is over the limit, on the first
bytes when the content is a refused type, and on the chunk that passes the size limit;
a refused upload's temporary file is removed at once (one an interrupted connection left
behind goes with the sweep).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from django.core.files.uploadhandler import FileUploadHandler

from attachments.errors import AttachmentTooLarge, UploadInvalid
from attachments.limits import FILE_MAX, too_large_message
from attachments.models import MediaType
from attachments.storage import Sniffer, name_clean, tmp_dir

# Room for the multipart boundaries and headers around the one file.
MULTIPART_OVERHEAD = 64 * 1024
# The most an upload's body may be; the web process refuses more before reading it (attachments/urls.py).
UPLOAD_BODY_MAX = FILE_MAX + MULTIPART_OVERHEAD
FIELD = "file"


@dataclass
class Upload:
    """A file received whole: its temporary path, cleaned name, sniffed type, size and hash."""

    path: Path
    name: str
    media_type: MediaType
    size: int
    sha256: str

    def close(self) -> None:
        """Nothing to close: the file was closed when it was complete."""


class AttachmentUploadHandler(FileUploadHandler):
    """Stream the one file of an upload to `attachments/tmp/`, hashing and sniffing it on the way."""

    def __init__(self, request: Any = None) -> None:
        super().__init__(request)
        self.file: IO[bytes] | None = None
        self.upload: Upload | None = None

    def handle_raw_input(
        self, input_data: Any, META: Any, content_length: int, boundary: Any, encoding: str | None = None
    ) -> None:
        if content_length > UPLOAD_BODY_MAX:
            raise AttachmentTooLarge(too_large_message())

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        if field_name != FIELD or self.file is not None or self.upload is not None:
            self.discard()
            raise UploadInvalid("Send one file, in the multipart field `file`.")
        self.name = name_clean(file_name)
        self.file = tempfile.NamedTemporaryFile(dir=tmp_dir(), prefix="upload-", delete=False)  # noqa: SIM115
        self.digest = hashlib.sha256()
        self.size = 0
        self.sniffer = Sniffer(self.name)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> None:
        assert self.file is not None
        self.size += len(raw_data)
        try:
            if self.size > FILE_MAX:
                raise AttachmentTooLarge(too_large_message())
            self.sniffer.feed(raw_data)
        except Exception:
            self.discard()
            raise
        self.digest.update(raw_data)
        self.file.write(raw_data)

    # Django files whatever this returns under the field; the view checks it is an Upload.
    def file_complete(self, file_size: int) -> Upload:  # type: ignore[override]
        assert self.file is not None
        try:
            media_type = self.sniffer.finish()
        except Exception:
            self.discard()
            raise
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        self.upload = Upload(Path(self.file.name), self.name, media_type, self.size, self.digest.hexdigest())
        return self.upload

    def discard(self) -> None:
        """Remove the temporary file of a refused upload."""
        if self.file is not None:
            self.file.close()
            Path(self.file.name).unlink(missing_ok=True)
        if self.upload is not None:
            self.upload.path.unlink(missing_ok=True)
