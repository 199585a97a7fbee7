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

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

from modelevents.adapters.errors import InputLimitError
from modelevents.adapters.limits import (
    InputLimits,
    current_limits,
    current_source,
)
from modelevents.schemas.errors import InputError

# libyaml's loader is ~10x faster on the large streaming cassettes; pure Python otherwise.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_GZIP_MAGIC = b"\x1f\x8b"
# Decompression hands out at most this much at a time, so a limit is checked before more is made.
_INFLATE_STEP = 1 << 20
# The ratio limit waits for this much output: a tiny body of repeated text may compress a lot.
_RATIO_FLOOR = 1 << 20


@dataclass(slots=True)
class Interaction:
    method: str
    uri: str
    request_body: bytes | None
    status: int
    content_type: str  # the response's Content-Type ("" when not recorded)
    body: bytes  # the response body, decompressed, verbatim otherwise
    response_headers: dict[str, str] = field(default_factory=dict)  # lower-case names, first value


def read_cassette(source: str | Path | bytes, *, limits: InputLimits | None = None,
                  name: str | None = None) -> list[Interaction]:
    """Every interaction of a VCR cassette, in recorded order. Raises InputError if unreadable.

    Bounded by ``limits`` (default: those of :func:`~modelevents.adapters.limits.using_limits`):
    YAML aliases may add at most ``max_yaml_alias_nodes`` nodes, a body decompresses to at most
    ``max_body_bytes`` and ``max_ratio`` times its compressed size, all response bodies together
    to ``max_cassette_bytes``; past a bound, :class:`InputLimitError` before the memory is spent.
    ``name`` (default: the path, or the source of ``using_limits``) is what errors call the file.
    """
    limits = limits or current_limits()
    if isinstance(source, (str, Path)):
        name = name or str(source)
        try:
            source = Path(source).read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read cassette {name}: {exc}") from exc
    name = name or current_source() or "<bytes>"
    try:
        doc = _load_yaml(source, name, limits)
    except yaml.YAMLError as exc:
        raise InputError(f"cassette {name} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("interactions"), list):
        raise InputError(f"cassette {name} has no `interactions` list (not a VCR cassette)")
    out = []
    budget = _BodyBudget(name, limits)
    for number, raw in enumerate(doc["interactions"], 1):
        try:
            out.append(_interaction(raw, budget.of(number)))
        except (KeyError, TypeError, ValueError, OSError, zlib.error) as exc:
            raise InputError(
                f"cassette {name}, interaction {number}: cannot read it ({exc!r})") from exc
    return out


def looks_like_cassette(body: bytes) -> bool:
    """Cheap check used by auto-detection: a YAML document with a top-level `interactions:`."""
    head = bytes(body[:4096]).lstrip()
    return head.startswith(b"interactions:") or b"\ninteractions:" in head


def _load_yaml(source: bytes, name: str, limits: InputLimits) -> Any:
    """``yaml.load`` with libyaml's parser, refusing aliases that expand past the limit.

    PyYAML has no alias limit (yaml/pyyaml#235): an alias is a shared reference, cheap to load,
    and a bomb costs only when walked (orjson.dumps of a ``parsed_body``, str of a header). As
    SnakeYAML, go-yaml and omegaconf do, the composed node graph is measured before anything is
    constructed; anchor-free documents cost one linear walk and are never refused.
    """
    loader = _Loader(source)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_aliases(node, name, limits.max_yaml_alias_nodes)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_aliases(root: yaml.Node, name: str, max_alias_nodes: int) -> None:
    """Refuse recursive aliases and aliases that add more than ``max_alias_nodes`` nodes.

    The expanded size of each distinct node is computed once (iteratively: no recursion limit),
    so a bomb is measured in time linear in its small size, never expanded.
    """
    sizes: dict[int, int] = {}  # id(node) → nodes it stands for once every alias is expanded
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
            continue
        if key in sizes:
            continue
        if key in on_path:  # the node contains itself
            raise InputError(f"cassette {name}: a YAML alias refers to a node that contains it "
                             f"(a recursive structure, never written by a VCR recorder)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    added = sizes[id(root)] - len(sizes)
    if added > max_alias_nodes:
        raise InputLimitError(f"its YAML aliases expand to {added:,} more nodes",
                              "max_yaml_alias_nodes", value=max_alias_nodes, source=name)


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        yield from node.value
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value


class _BodyBudget:
    """What the response bodies of one cassette may still decompress to (max_cassette_bytes)."""

    def __init__(self, name: str, limits: InputLimits) -> None:
        self.name, self.limits = name, limits
        self.spent = 0

    def of(self, number: int) -> _Inflate:
        return _Inflate(self, number)


class _Inflate:
    """The bounds of one body: its own limit, the ratio, and what is left of the cassette's."""

    def __init__(self, budget: _BodyBudget, number: int) -> None:
        self.budget, self.number = budget, number

    def _error(self, what: str, limit: str, value: int) -> InputLimitError:
        return InputLimitError(f"interaction {self.number}'s response body {what}", limit,
                               value=value, source=self.budget.name)

    def check(self, size: int, consumed: int, encoding: str) -> None:
        """``size`` bytes out so far of ``consumed`` compressed bytes (0: stored as is)."""
        limits = self.budget.limits
        if size > limits.max_body_bytes:
            raise self._error(f"decompresses ({encoding}) to more than "
                              f"{limits.max_body_bytes:,} bytes" if consumed else
                              f"holds {size:,} bytes", "max_body_bytes", limits.max_body_bytes)
        if self.budget.spent + size > limits.max_cassette_bytes:
            raise InputLimitError(
                f"the response bodies of the cassette hold more than "
                f"{limits.max_cassette_bytes:,} bytes together (at interaction {self.number})",
                "max_cassette_bytes", value=limits.max_cassette_bytes, source=self.budget.name)
        if consumed and size > _RATIO_FLOOR and size > limits.max_ratio * consumed:
            raise self._error(f"decompresses ({encoding}) to more than {limits.max_ratio} "
                              f"times its compressed size ({size:,} bytes from {consumed:,})",
                              "max_ratio", limits.max_ratio)

    def done(self, body: bytes) -> bytes:
        self.check(len(body), 0, "")
        self.budget.spent += len(body)
        return body

    def truncated(self, encoding: str) -> InputError:
        return InputError(
            f"cassette {self.budget.name}, interaction {self.number}: the {encoding} response "
            f"body is cut short (it ends before its end-of-stream marker): the recording is "
            f"incomplete; re-record it")


def _interaction(raw: dict[str, Any], inflate: _Inflate) -> Interaction:
    request, response = raw["request"], raw["response"]
    headers = _headers(response.get("headers"))
    status = response.get("status") or {}
    code = status.get("code") if isinstance(status, dict) else status
    body = _decompress(_body(response) or b"", headers.get("content-encoding", ""), inflate)
    return Interaction(
        method=str(request.get("method", "")).upper(),
        uri=str(request.get("uri", "")),
        request_body=_body(request),
        status=int(code) if code is not None else 0,
        content_type=headers.get("content-type", ""),
        body=inflate.done(body),
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


def _decompress(body: bytes, encoding: str, inflate: _Inflate) -> bytes:
    """Undo gzip/deflate when the stored bytes are still compressed (vcrpy keeps them so).

    The header alone is not proof: recorders that decode bodies often keep Content-Encoding.
    """
    if body[:2] == _GZIP_MAGIC:
        return _inflate(body, zlib.MAX_WBITS | 16, "gzip", inflate)
    if "deflate" in encoding:
        for wbits in (zlib.MAX_WBITS, -zlib.MAX_WBITS):  # zlib-wrapped, then raw deflate
            try:
                return _inflate(body, wbits, "deflate", inflate)
            except zlib.error:
                continue
    return body


def _inflate(body: bytes, wbits: int, encoding: str, inflate: _Inflate) -> bytes:
    """Decompress ``body`` a step at a time, checking the limits after each step.

    A gzip body may hold several members, one after the other (RFC 1952 §2.2); zero padding
    after the last is ignored, as gzip.decompress does. Raises zlib.error for bytes that are no
    such stream.
    """
    parts: list[bytes] = []
    size = 0
    data = body
    while data:
        decoder = zlib.decompressobj(wbits)
        while not decoder.eof:
            chunk = decoder.decompress(data, _INFLATE_STEP)
            data = decoder.unconsumed_tail
            if not chunk and not data:
                raise inflate.truncated(encoding)
            size += len(chunk)
            inflate.check(size, len(body) - len(data), encoding)
            parts.append(chunk)
        data = decoder.unused_data
        if encoding != "gzip" or data[:2] != _GZIP_MAGIC:
            if data.strip(b"\0"):
                raise zlib.error(f"{len(data)} bytes after the end of the {encoding} stream")
            break
    return b"".join(parts)
