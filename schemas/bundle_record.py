"""A bundle as a Kafka record (``schemas/avro/migration/bundle.avsc``): Avro single-object
encoding, keyed by its id on the compacted ``<prefix>bundles`` topic.

    data = encode(bundle, created_at=now_ms)   # C3 01 | CRC-64-AVRO fingerprint | Avro body
    stored = decode(data)                      # StoredBundle(bundle, created_at)
    stored.bundle.bundle_id == bundle.bundle_id

The free-form parts of a bundle — a tool's JSON Schema, the capability manifest entry, a
structured-output schema — travel as canonical JSON strings (keys sorted): Avro has no type
for "any JSON", and a string keeps them byte for byte. Every other field is typed. A reader
recomputes the id from what it decoded and refuses a record whose content does not hash to
the id it names, so a bundle read from the topic is the bundle that was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from modelevents.schemas.bundles import BUNDLE_ID_PREFIX, Bundle
from modelevents.schemas.errors import SchemaError
from modelevents.schemas.run_input import SingleObjectCodec

__all__ = ["SCHEMA_PATH", "StoredBundle", "encode", "decode", "is_bundle_record", "looks_like_id",
           "schema_fingerprint", "record_of", "bundle_of"]

SCHEMA_PATH = Path(__file__).parent / "avro" / "migration" / "bundle.avsc"

_CODEC = SingleObjectCodec(SCHEMA_PATH, "Bundle")


@dataclass(frozen=True, slots=True)
class StoredBundle:
    """A bundle read back from the topic, with when it was written (epoch ms)."""

    bundle: Bundle
    created_at: int

    @property
    def bundle_id(self) -> str:
        return self.bundle.bundle_id


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def record_of(bundle: Bundle, created_at: int) -> dict[str, Any]:
    """The Avro record (a dict fastavro and official Avro write) of ``bundle``."""
    doc = bundle.model_dump(mode="json", by_alias=True)
    sampling = doc["sampling"]
    return {
        "bundle_id": bundle.bundle_id,
        "name": doc["name"],
        "description": doc["description"],
        "instruction": doc["instruction"],
        "target": doc["target"],
        "request_adapter": doc["request_adapter"],
        "event_adapters": doc["event_adapters"],
        "event_schema": doc["event_schema"],
        "tools": [{"name": t["declaration"]["name"], "declaration": _json(t["declaration"]),
                   "schema_version": t["schema_version"]} for t in doc["tools"]],
        "capabilities": _json(doc["capabilities"]),
        "sampling": {"temperature": sampling["temperature"],
                     "max_output_tokens": sampling["max_output_tokens"],
                     "structured_output": (None if sampling["structured_output"] is None
                                           else _json(sampling["structured_output"]))},
        "created_at": created_at,
    }


def _loads(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise SchemaError(f"a Bundle record whose {what} is not JSON: {exc}") from None


def bundle_of(record: dict[str, Any]) -> StoredBundle:
    """The bundle of a decoded record; SchemaError when it does not validate or its content does
    not hash to its ``bundle_id``."""
    sampling = record["sampling"]
    doc = {
        "name": record["name"], "description": record["description"],
        "instruction": record["instruction"], "target": record["target"],
        "request_adapter": record["request_adapter"], "event_adapters": record["event_adapters"],
        "event_schema": record["event_schema"],
        "tools": [{"declaration": _loads(t["declaration"], f"tool {t['name']!r}"),
                   "schema_version": t["schema_version"]} for t in record["tools"]],
        "capabilities": _loads(record["capabilities"], "capabilities"),
        "sampling": {"temperature": sampling["temperature"],
                     "max_output_tokens": sampling["max_output_tokens"],
                     "structured_output": _loads(sampling["structured_output"],
                                                 "structured_output")},
    }
    try:
        bundle = Bundle.model_validate(doc)
    except ValueError as exc:
        raise SchemaError(f"Bundle record {record['bundle_id']!r} does not validate: "
                          f"{exc}") from None
    if bundle.bundle_id != record["bundle_id"]:
        raise SchemaError(f"Bundle record names id {record['bundle_id']!r} but its content "
                          f"hashes to {bundle.bundle_id!r}: refused")
    return StoredBundle(bundle, record["created_at"])


def schema_fingerprint() -> bytes:
    return _CODEC.fingerprint


def is_bundle_record(value: bytes | None) -> bool:
    return _CODEC.matches(value)


def encode(bundle: Bundle, created_at: int) -> bytes:
    return _CODEC.encode(record_of(bundle, created_at))


def decode(value: bytes) -> StoredBundle:
    """The bundle of a single-object encoded value; SchemaError for anything else."""
    return bundle_of(_CODEC.decode(value))


def looks_like_id(text: str) -> bool:
    """Whether ``text`` could be a bundle id or a prefix of one (``bnd-`` and hex)."""
    rest = text.removeprefix(BUNDLE_ID_PREFIX)
    return bool(rest) and all(c in "0123456789abcdef" for c in rest) and len(rest) <= 64
