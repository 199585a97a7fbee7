"""VCR cassettes (YAML) → the HTTP interactions they recorded, response bodies as raw bytes.

The dialects met in the corpus:
- vcrpy: ``response.body.string`` holds the body as text, or as ``!!binary`` (base64) when it
  was bytes — llm-anthropic and llm-gemini store the still gzip-compressed body that way;
- pydantic-ai: JSON bodies are stored parsed, as ``parsed_body`` (request and response), and
  re-serialized here (compact JSON: the provider's own whitespace is gone, the content is not).

Reading is pure: no network, no clock. The request side is kept (method, uri, body) because the
uri says which provider API answered and the request says whether the call was streamed.
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from modelevents.schemas.errors import InputError

# libyaml's loader is ~10x faster on the large streaming cassettes; pure Python otherwise.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(slots=True)
class Interaction:
    method: str
    uri: str
    request_body: bytes | None
    status: int
    content_type: str  # the response's Content-Type ("" when not recorded)
    body: bytes  # the response body, decompressed, verbatim otherwise
    response_headers: dict[str, str] = field(default_factory=dict)  # lower-case names, first value


def read_cassette(source: str | Path | bytes) -> list[Interaction]:
    """Every interaction of a VCR cassette, in recorded order. Raises InputError if unreadable."""
    name = "<bytes>"
    if isinstance(source, (str, Path)):
        name = str(source)
        try:
            source = Path(source).read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read cassette {name}: {exc}") from exc
    try:
        doc = yaml.load(source, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise InputError(f"cassette {name} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("interactions"), list):
        raise InputError(f"cassette {name} has no `interactions` list (not a VCR cassette)")
    out = []
    for number, raw in enumerate(doc["interactions"], 1):
        try:
            out.append(_interaction(raw))
        except (KeyError, TypeError, ValueError, OSError, zlib.error) as exc:
            raise InputError(
                f"cassette {name}, interaction {number}: cannot read it ({exc!r})") from exc
    return out


def looks_like_cassette(body: bytes) -> bool:
    """Cheap check used by auto-detection: a YAML document with a top-level `interactions:`."""
    head = bytes(body[:4096]).lstrip()
    return head.startswith(b"interactions:") or b"\ninteractions:" in head


def _interaction(raw: dict[str, Any]) -> Interaction:
    request, response = raw["request"], raw["response"]
    headers = _headers(response.get("headers"))
    status = response.get("status") or {}
    code = status.get("code") if isinstance(status, dict) else status
    body = _body(response)
    body = _decompress(body or b"", headers.get("content-encoding", ""))
    return Interaction(
        method=str(request.get("method", "")).upper(),
        uri=str(request.get("uri", "")),
        request_body=_body(request),
        status=int(code) if code is not None else 0,
        content_type=headers.get("content-type", ""),
        body=body,
        response_headers=headers,
    )


def _headers(raw: Any) -> dict[str, str]:
    """vcrpy stores each header as a list of values; keep the first, lower-case the name."""
    out: dict[str, str] = {}
    for key, value in (raw or {}).items():
        if isinstance(value, list):
            value = value[0] if value else ""
        out[str(key).lower()] = str(value)
    return out


def _body(part: dict[str, Any]) -> bytes | None:
    if "parsed_body" in part:  # pydantic-ai: the JSON body, stored as YAML
        return orjson.dumps(part["parsed_body"], default=str)
    body = part.get("body")
    if isinstance(body, dict):  # vcrpy response: {string: ...}
        body = body.get("string")
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    return orjson.dumps(body, default=str)  # a structure some recorder stored inline


def _decompress(body: bytes, encoding: str) -> bytes:
    """Undo gzip/deflate when the stored bytes are still compressed (vcrpy keeps them so).

    The header alone is not proof: recorders that decode bodies often keep Content-Encoding.
    """
    if body[:2] == _GZIP_MAGIC:
        return gzip.decompress(body)
    if "deflate" in encoding:
        for wbits in (zlib.MAX_WBITS, -zlib.MAX_WBITS):  # zlib-wrapped, then raw deflate
            try:
                return zlib.decompress(body, wbits)
            except zlib.error:
                continue
    return body
