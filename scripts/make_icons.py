"""Write the installable app's icons (static/flarebot/icons/icon-192.png, icon-512.png).

Run once after changing the design: `python scripts/make_icons.py`. Standard library only
(a PNG is zlib-compressed rows behind three chunks): the brand's orange square with a white
flare (a disc inside a ring), kept inside the middle 60% so a maskable crop never cuts it.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

ICONS = Path(__file__).resolve().parent.parent / "static" / "flarebot" / "icons"
BACKGROUND = (0xC2, 0x41, 0x0C)  # base.css --accent
FOREGROUND = (0xFF, 0xFF, 0xFF)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def _shade(x: float, y: float, size: int) -> float:
    """How much of the foreground covers the pixel centred at (x, y): 0 to 1, edges smoothed."""
    centre = size / 2
    distance = ((x - centre) ** 2 + (y - centre) ** 2) ** 0.5 / size

    def inside(edge: float, d: float) -> float:
        return max(0.0, min(1.0, (edge - d) * size + 0.5))

    disc = inside(0.13, distance)
    ring = inside(0.29, distance) * (1 - inside(0.22, distance))
    return max(disc, ring)


def png(size: int) -> bytes:
    rows = bytearray()
    for row in range(size):
        rows.append(0)  # no filter
        for column in range(size):
            a = _shade(column + 0.5, row + 0.5, size)
            rows.extend(round(b + (f - b) * a) for b, f in zip(BACKGROUND, FOREGROUND, strict=True))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)  # 8-bit RGB
    chunks = _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + _chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


def main() -> None:
    ICONS.mkdir(parents=True, exist_ok=True)
    for size in (192, 512):
        (ICONS / f"icon-{size}.png").write_bytes(png(size))


if __name__ == "__main__":
    main()
