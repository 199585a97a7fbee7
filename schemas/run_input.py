"""A run's input packet (``schemas/avro/inputs/run_input.avsc``): the record, its canonical
request encoding and its Avro single-object codec.

    packet = RunInput(run_id=…, request=canonical_request(neutral_doc), …)
    data = encode(packet)          # C3 01 | CRC-64-AVRO fingerprint | Avro body
    decode(data) == packet
    is_run_input(data)             # the header names this schema

The packet is the gateway's record, not one of the events topic's: it lives on its own
compacted topic (``<prefix>run-inputs``, key run_id), so the events codec (``codec.py``) does not
carry it and it has a codec of its own here, written and read by fastavro from the one schema
file (official Avro reads it too: ``tests/schemas/test_run_input.py``).

**The fingerprint** is SHA-256 of the canonical JSON of the neutral request as stored — after
redaction, so that anyone holding the packet recomputes it (``audit verify`` does) and no hash
of a secret is ever published; two requests that differ only in a redacted secret share it.
Canonical JSON: object keys sorted, no whitespace, UTF-8 (not ``\\u`` escapes), every field of
the request model present (defaults included), so the same request sent twice, with its keys
in any order or its defaults left out, has the same fingerprint.
"""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import fastavro
import orjson

from modelevents.schemas.codec import fingerprint_of, without_logical_types
from modelevents.schemas.errors import SchemaError

__all__ = ["RunInput", "RedactionPolicy", "RedactionPattern", "SCHEMA_PATH", "encode", "decode",
           "is_run_input", "schema_fingerprint", "canonical_request", "request_fingerprint",
           "NOT_IN_FINGERPRINT", "SingleObjectCodec"]

SCHEMA_PATH = Path(__file__).parent / "avro" / "inputs" / "run_input.avsc"
# Earlier versions of the packet's schema, still read (their new fields at their defaults).
HISTORY_PATHS = sorted((SCHEMA_PATH.parent / "history").glob("run_input.*.avsc"))
MAGIC = b"\xc3\x01"

# Fields of the neutral request that say who and which run, not what was asked.
NOT_IN_FINGERPRINT = frozenset({"run_id", "tenant", "session_id"})


@dataclass(frozen=True, slots=True)
class RedactionPattern:
    name: str
    regex: str


@dataclass(frozen=True, slots=True)
class RedactionPolicy:
    name: str
    fields: list[str]
    patterns: list[RedactionPattern]
    fingerprint: str
    redactions: int = 0


@dataclass(frozen=True, slots=True)
class RunInput:
    run_id: str
    tenant: str
    origin: Literal["gateway", "forwarded"]
    call: str
    revision: int
    recorded_at: int
    request: str
    fingerprint: str
    adapter: str
    provider: str
    api: str
    model: str
    redaction: RedactionPolicy
    correlation_id: str | None = None
    provider_object_id: str | None = None
    last_cursor: str | None = None
    expires_at: int | None = None
    cancellable_by: list[str] = field(default_factory=list)
    bundle: str | None = None  # v2: the bundle the run was started under

    def request_doc(self) -> dict[str, Any]:
        """The stored (redacted) neutral request as a JSON object."""
        doc = orjson.loads(self.request)
        if not isinstance(doc, dict):
            raise SchemaError(f"run {self.run_id}: the packet's request is not a JSON object")
        return doc


def canonical_request(doc: dict[str, Any]) -> str:
    """The canonical JSON of a neutral request's JSON form, without the fields that name the
    run rather than the request (:data:`NOT_IN_FINGERPRINT`)."""
    kept = {k: v for k, v in doc.items() if k not in NOT_IN_FINGERPRINT}
    # orjson: sorted keys, no whitespace, UTF-8 as is, shortest float repr — stable across runs.
    return orjson.dumps(kept, option=orjson.OPT_SORT_KEYS).decode()


def request_fingerprint(request: str) -> str:
    return hashlib.sha256(request.encode()).hexdigest()


class SingleObjectCodec:
    """The Avro single-object encoding (``C3 01`` | CRC-64-AVRO fingerprint | body) of the one
    record schema in ``path``, written and read by fastavro (without logical types: the same
    bytes, timestamps stay epoch-ms ints). The packet's, and its pieces' (run_input_pieces.py)."""

    def __init__(self, path: Path, name: str, history: list[Path] | None = None) -> None:
        self.path, self.name = path, name
        self.history = history or []

    @cached_property
    def _older(self) -> dict[bytes, dict[str, Any]]:
        """Fingerprint → the writer schema of each earlier version (``history``)."""
        found = {}
        for path in self.history:
            parsed = fastavro.parse_schema(without_logical_types(json.loads(path.read_text())),
                                           {})
            if isinstance(parsed, dict):
                found[fingerprint_of(parsed)] = parsed
        return found

    @cached_property
    def _parsed(self) -> tuple[dict[str, Any], bytes]:
        parsed = fastavro.parse_schema(without_logical_types(json.loads(self.path.read_text())),
                                       {})
        if not isinstance(parsed, dict):
            raise SchemaError(f"{self.path} is not an Avro record schema")
        return parsed, fingerprint_of(parsed)

    @property
    def fingerprint(self) -> bytes:
        return self._parsed[1]

    def matches(self, value: bytes | None) -> bool:
        """Whether the value's header names this schema (or an earlier version of it)."""
        return value is not None and value[:2] == MAGIC and (
            value[2:10] == self._parsed[1] or value[2:10] in self._older)

    def encode(self, doc: dict[str, Any]) -> bytes:
        parsed, fp = self._parsed
        out = io.BytesIO()
        out.write(MAGIC + fp)
        fastavro.schemaless_writer(out, parsed, doc)
        return out.getvalue()

    def decode(self, value: bytes) -> dict[str, Any]:
        """The record of a value :meth:`matches`; SchemaError for anything else."""
        if not self.matches(value):
            raise SchemaError(f"not a {self.name} record: its header does not name the "
                              f"{self.path.name} schema")
        writer = self._older.get(value[2:10], self._parsed[0])
        reader = None if writer is self._parsed[0] else self._parsed[0]
        try:
            doc = fastavro.schemaless_reader(io.BytesIO(value[10:]), writer, reader)
        except Exception as exc:  # fastavro raises what the bytes provoke (EOF, bad union index…)
            raise SchemaError(f"a {self.name} record that cannot be read: {exc!r}") from exc
        if not isinstance(doc, dict):
            raise SchemaError(f"a {self.name} record that is not a record")
        return doc


_CODEC = SingleObjectCodec(SCHEMA_PATH, "RunInput", HISTORY_PATHS)


def schema_fingerprint() -> bytes:
    return _CODEC.fingerprint


def is_run_input(value: bytes | None) -> bool:
    return _CODEC.matches(value)


def encode(packet: RunInput) -> bytes:
    return _CODEC.encode(asdict(packet))


def decode(value: bytes) -> RunInput:
    """The packet of a single-object encoded value; SchemaError for anything else."""
    doc = _CODEC.decode(value)
    policy = doc.pop("redaction")
    policy["patterns"] = [RedactionPattern(**p) for p in policy["patterns"]]
    return RunInput(redaction=RedactionPolicy(**policy), **doc)
