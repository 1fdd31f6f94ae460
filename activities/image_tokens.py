"""What an image costs in a request, in tokens, without a model to ask.

An image is stored as one neutral part: ``{"media_type": ..., "data": <base64>}`` (sent inline)
or ``{"url": ...}`` (the provider fetches it), with an optional ``detail``. Its cost is the larger
of what the two providers' published rules charge for its size, so that a request planned with
it never comes out over the budget whichever provider gets it:

- OpenAI (``detail`` high or auto): scaled to fit 2048 x 2048, then its shorter side to 768;
  85 tokens plus 170 per 512-pixel tile (``detail: low``: 85);
- Anthropic: scaled to at most 1568 pixels on the long edge and 1.15 megapixels; width x
  height / 750 tokens.

The size is read from the image's own header (PNG, GIF, JPEG, WebP); an image whose size
cannot be read (a URL, another format) is charged the most either rule charges any image.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from typing import Any

UNKNOWN_IMAGE_TOKENS = 1_600  # the most either rule charges one image (Anthropic, at 1.15 megapixels)
LOW_DETAIL_TOKENS = 85
HEADER_BYTES = 64 * 1024  # a JPEG's size marker may follow its metadata; this much is decoded at most


def image_tokens(part: dict[str, Any]) -> int:
    """Tokens one stored image part costs (see the module docstring)."""
    size = image_size(part)
    if size is None:
        return UNKNOWN_IMAGE_TOKENS
    width, height = size
    openai = LOW_DETAIL_TOKENS if part.get("detail") == "low" else _openai_tokens(width, height)
    return max(openai, _anthropic_tokens(width, height))


def image_size(part: dict[str, Any]) -> tuple[int, int] | None:
    """(width, height) from the image's header, or None (no inline data, or a header not read)."""
    data = part.get("data")
    if not isinstance(data, str) or not data:
        return None
    head = data[: HEADER_BYTES * 4 // 3]
    head = head[: len(head) - len(head) % 4]
    try:
        raw = base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return None
    size = _png(raw) or _gif(raw) or _webp(raw) or _jpeg(raw)
    return size if size is not None and size[0] > 0 and size[1] > 0 else None


def _openai_tokens(width: int, height: int) -> int:
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return LOW_DETAIL_TOKENS + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _anthropic_tokens(width: int, height: int) -> int:
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return math.ceil(width * scale * height * scale / 750)


def _png(raw: bytes) -> tuple[int, int] | None:
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24 and raw[12:16] == b"IHDR":
        width, height = struct.unpack(">II", raw[16:24])
        return int(width), int(height)
    return None


def _gif(raw: bytes) -> tuple[int, int] | None:
    if raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return int(width), int(height)
    return None


def _webp(raw: bytes) -> tuple[int, int] | None:
    if raw[:4] != b"RIFF" or raw[8:12] != b"WEBP" or len(raw) < 30:
        return None
    chunk = raw[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(raw[27:30], "little")
    if chunk == b"VP8L" and raw[20] == 0x2F:
        bits = int.from_bytes(raw[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 " and raw[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


# JPEG start-of-frame markers (baseline, progressive, ...): not DHT (C4), JPG (C8) or DAC (CC)
_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def _jpeg(raw: bytes) -> tuple[int, int] | None:
    if raw[:2] != b"\xff\xd8":
        return None
    at = 2
    while at + 4 <= len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            at += 2
            continue
        length = struct.unpack(">H", raw[at + 2:at + 4])[0]
        if marker in _SOF and at + 9 <= len(raw):
            height, width = struct.unpack(">HH", raw[at + 5:at + 9])
            return int(width), int(height)
        at += 2 + length
    return None
