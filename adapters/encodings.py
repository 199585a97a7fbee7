"""Two conversions providers leave to the client, each done here once.

- ``decode_base64``: inline media (Gemini ``inlineData.data``, Interactions image/audio ``data``)
  arrives base64-encoded — standard alphabet per the reference, the URL-safe one from some
  servers, padding sometimes dropped. Whatever is not base64 at all is None: the adapter says so
  (``malformed_media``) and the envelope keeps the text. ``lenient=True`` (OpenAI Responses
  images and audio) also reads what JavaScript's and binascii's decoders read: characters
  outside the alphabet skipped — as the Vercel AI SDK does with the same recordings.
- ``byte_to_char``: Google counts citation and grounding offsets in UTF-8 *bytes* of the text
  (Gemini generateContent reference, ``Segment``; Interactions annotations); events count
  *characters* (code points, what Python indexes). An offset inside a character counts that
  character as not reached yet.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

__all__ = ["byte_to_char", "char_span", "decode_base64"]


def decode_base64(data: Any, lenient: bool = False) -> bytes | None:
    """Base64 text (standard or URL-safe alphabet, padded or not) → bytes; None when it is not
    base64 (or not text). "" is b"" (an empty blob). ``lenient``: characters outside the
    alphabet are skipped as a last resort (module doc)."""
    if type(data) is not str:
        return None
    decoded = _decode_strict(data)
    if decoded is None and lenient:
        try:
            return binascii.a2b_base64(data)
        except (binascii.Error, ValueError):
            return None
    return decoded


def _decode_strict(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        pass
    try:
        # URL-safe alphabet, dropped padding, line breaks (MIME style): the same bytes.
        text = "".join(data.split()).replace("-", "+").replace("_", "/")
        text += "=" * (-len(text) % 4)
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def byte_to_char(raw: bytes, offset: int) -> int:
    """The character offset in ``raw.decode()`` of UTF-8 byte ``offset`` (clamped to the text)."""
    if offset <= 0:
        return 0
    return len(raw[:offset].decode("utf-8", "ignore"))


def char_span(text: str, start: Any, end: Any) -> tuple[int | None, int | None]:
    """A (start, end) span in UTF-8 bytes of ``text`` → the same span in characters; (None,
    None) when the provider's offsets are not integers."""
    if type(start) is not int or type(end) is not int:
        return None, None
    if text.isascii():
        return max(start, 0), max(end, 0)
    raw = text.encode()
    return byte_to_char(raw, start), byte_to_char(raw, end)
