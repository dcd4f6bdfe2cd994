"""Files the attachment tests upload: made here, small unless a limit asks for size."""

from __future__ import annotations

import io
import struct
import zlib

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client


def png(width: int = 2, height: int = 2) -> bytes:
    """Return a valid RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def pdf(pages: list[str]) -> bytes:
    """Return a PDF with one page per text, made with pypdf."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for text in pages:
        page = writer.add_blank_page(width=300, height=200)
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
        )
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def upload(client: Client, conversation_id: object, name: str, content: bytes, **kwargs):
    """POST one file as the page does: to a conversation, or (None) to none yet, as in a new chat."""
    return client.post(
        "/api/attachments/" if conversation_id is None else f"/api/conversations/{conversation_id}/attachments/",
        {"file": SimpleUploadedFile(name, content, content_type="application/octet-stream")},
        **kwargs,
    )
