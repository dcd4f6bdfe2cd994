"""The blobs under the data dir, and the one decision of what a file is (by its content).

A blob lives at `attachments/<sha256[:2]>/<sha256>` and is written once: an upload goes
to a temporary file in `attachments/tmp/`, is flushed and fsynced, then renamed into
place (atomic on one filesystem), so a reader never sees half a file and the same content
is stored once. A temporary file an interrupted upload left behind is removed by the
sweep (`attachments.services.attachments_sweep`) once it is older than `TMP_MAX_AGE`.

Sniffing decides from the first bytes (`sniff_start`, called on the first chunk of an
upload so a refused type stops it early) and, for text, from all of it (`Sniffer`):
images and PDFs by their magic numbers, text when it is UTF-8 without NUL, classified by
the name's extension (Markdown, CSV, JSON; code and anything else is plain text); markup
a browser would run (HTML, SVG, XML) is refused whatever the name says.

Only the start is checked for markup: text with markup further in (a `page.html` whose
`<script>` comes after a page of notes, source code holding HTML) is stored as text. So
a file downloads under `download_name`, which ends in an extension of its stored type
(`page.html` as `page.html.txt`, a GIF named `poly.html` as `poly.html.gif`): saved and
opened, it opens as what it was served as, never as a page. The stored name stays the
one the owner gave, for display.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import unicodedata
from datetime import timedelta
from pathlib import Path

from django.conf import settings

from attachments.errors import UnsupportedType
from attachments.models import MediaType

TMP_MAX_AGE = timedelta(hours=1)
NAME_MAX = 255
# Bytes enough for every signature below and for markup after a BOM and some blank lines.
SNIFF_BYTES = 512
_SHA256 = re.compile(r"^[0-9a-f]{64}$")

_MAGIC: list[tuple[bytes, int, MediaType]] = [
    (b"\x89PNG\r\n\x1a\n", 0, MediaType.PNG),
    (b"\xff\xd8\xff", 0, MediaType.JPEG),
    (b"GIF87a", 0, MediaType.GIF),
    (b"GIF89a", 0, MediaType.GIF),
    (b"%PDF-", 0, MediaType.PDF),
]
_MARKUP = re.compile(rb"^(\xef\xbb\xbf)?\s*<(!doctype|html|svg|\?xml|script|head|body|iframe|!--)", re.IGNORECASE)
_BY_EXTENSION = {"md": MediaType.MARKDOWN, "markdown": MediaType.MARKDOWN, "csv": MediaType.CSV, "json": MediaType.JSON}
# What a served file's download name may end in, by its type; the first is added to any other name.
_DOWNLOAD_EXTENSIONS: dict[str, tuple[str, ...]] = {
    MediaType.PNG: ("png",),
    MediaType.JPEG: ("jpg", "jpeg"),
    MediaType.GIF: ("gif",),
    MediaType.WEBP: ("webp",),
    MediaType.PDF: ("pdf",),
    MediaType.TEXT: ("txt",),
    MediaType.MARKDOWN: ("md", "markdown"),
    MediaType.CSV: ("csv",),
    MediaType.JSON: ("json",),
}


def root() -> Path:
    """Return the attachments directory under the data dir."""
    return Path(settings.FLAREBOT_DATA_DIR) / "attachments"


def tmp_dir() -> Path:
    """Return (making it) the directory of uploads still being written."""
    path = root() / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path


def blob_path(sha256: str) -> Path:
    """Return where the blob of this hash lives; the hash is checked, never a name."""
    if not _SHA256.match(sha256):
        raise ValueError("not a sha256")
    return root() / sha256[:2] / sha256


def blob_commit(tmp: Path, sha256: str) -> None:
    """Move a complete, fsynced temporary file into place (or drop it when the blob exists)."""
    target = blob_path(sha256)
    if target.exists():
        tmp.unlink(missing_ok=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def blob_remove(sha256: str) -> None:
    """Remove a blob; a missing one is removed already."""
    blob_path(sha256).unlink(missing_ok=True)


def blobs_stored() -> list[str]:
    """Return the hashes of every blob on disk."""
    found: list[str] = []
    base = root()
    if not base.is_dir():
        return []
    for shard in base.iterdir():
        if shard.is_dir() and len(shard.name) == 2:
            found.extend(p.name for p in shard.iterdir() if _SHA256.match(p.name))
    return found


def name_clean(raw: str) -> str:
    """Return a file's name fit for display: no path, no control characters, at most 255 characters."""
    name = raw.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp")).strip()
    if name in ("", ".", ".."):
        return "attachment"
    if len(name) > NAME_MAX:
        stem, dot, extension = name.rpartition(".")
        if dot and 0 < len(extension) <= 16:
            name = stem[: NAME_MAX - len(extension) - 1] + "." + extension
        else:
            name = name[:NAME_MAX]
    return name


def download_name(name: str, media_type: str) -> str:
    """Return the name a file downloads under: its own when it ends in an extension of its type, else with one added."""
    extensions = _DOWNLOAD_EXTENSIONS[media_type]
    if name.lower().endswith(tuple(f".{extension}" for extension in extensions)):
        return name
    suffix = f".{extensions[0]}"
    return name[: NAME_MAX - len(suffix)] + suffix


def _extension(name: str) -> str:
    stem, dot, extension = name.rpartition(".")
    return extension.lower() if dot and stem else name.lower()


def sniff_start(start: bytes) -> MediaType | None:
    """Return the binary type the first bytes prove, None for a text candidate; raise for refused content."""
    for magic, offset, media_type in _MAGIC:
        if start[offset : offset + len(magic)] == magic:
            return media_type
    if start[:4] == b"RIFF" and start[8:12] == b"WEBP":
        return MediaType.WEBP
    if _MARKUP.match(start):
        raise UnsupportedType("Web pages, SVG and XML are not supported as attachments.")
    if b"\x00" in start:
        raise UnsupportedType()
    return None


class Sniffer:
    """Decide a file's type as its bytes arrive: `feed` each chunk (it raises early), then `finish`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pending = b""
        self._start = b""
        self._binary: MediaType | None = None
        self._decided = False
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = bytearray()

    def feed(self, chunk: bytes) -> None:
        if not self._decided:
            # The start is decided on once SNIFF_BYTES arrived (or at `finish`).
            self._pending += chunk
            if len(self._pending) < SNIFF_BYTES:
                return
            chunk, self._pending = self._pending, b""
            self._decide(chunk[:SNIFF_BYTES])
        self._text(chunk)

    def _decide(self, start: bytes) -> None:
        self._start = start
        self._binary = sniff_start(start)
        self._decided = True

    def _text(self, chunk: bytes) -> None:
        if self._binary is not None:
            return
        if b"\x00" in chunk:
            raise UnsupportedType()
        try:
            self._decoder.decode(chunk)
        except UnicodeDecodeError:
            raise UnsupportedType() from None
        if _BY_EXTENSION.get(_extension(self.name)) == MediaType.JSON:
            self._json += chunk

    def finish(self) -> MediaType:
        """Return the file's type once every byte was fed; raise when it is refused."""
        if not self._decided:
            pending, self._pending = self._pending, b""
            self._decide(pending)
            self._text(pending)
        if self._binary is not None:
            return self._binary
        try:
            self._decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise UnsupportedType() from None
        if not self._start.strip():
            raise UnsupportedType("The file is empty.")
        media_type = _BY_EXTENSION.get(_extension(self.name))
        if media_type == MediaType.JSON:
            try:
                json.loads(bytes(self._json))
            except ValueError:
                raise UnsupportedType("The file is named .json but is not valid JSON.") from None
        return media_type or MediaType.TEXT


def text_read(path: Path) -> str:
    """Return a text blob's content."""
    return path.read_text(encoding="utf-8", errors="replace")
