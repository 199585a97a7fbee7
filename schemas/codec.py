"""Avro codec for the contract records: single-object encoding with fastavro.

Wire form (Avro 1.x specification, "Single-object encoding"):

    C3 01 | CRC-64-AVRO fingerprint of the writer schema's canonical form (8 bytes, LE) | body

The fingerprint names the writer schema; the codec resolves it among the schema files shipped in
``schemas/avro/`` (current) and ``schemas/avro/history/`` (every released earlier version), and
reads with the current schema as reader, so a record written by any released version stays
readable after the schema evolves.

Encoding runs through encoders compiled from the same schema files (``avro_writer``: fastavro's
interpreter costs ~0.5 µs per field, too much for the adapters' hot path); the tests hold them
byte-identical to fastavro's writer. ``CACHED_STRINGS`` names the string fields whose few values
repeat on every event: their encodings are memoized. Records written with a current schema are
read by readers compiled from it (``avro_reader``; the tests hold them equal to fastavro's
reader); records of an earlier schema version are read, and resolved, by fastavro.

More on this module: docs/schemas.md, ``schemas/codec.py``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from modelevents.schemas.avro_reader import compile_reader
from modelevents.schemas.avro_writer import compile_encoder
from modelevents.schemas.errors import CorruptRecord, SchemaError, UnknownSchemaError
from modelevents.schemas.events import (
    KIND_PAYLOAD,
    PAYLOAD_TYPES,
    Elided,
    Envelope,
    EventSource,
    ModelEvent,
    Piece,
    Usage,
    payload_dict,
)
from modelevents.schemas.frames import FramePiece, ProviderFrame
from modelevents.schemas.run_state import DeadLetter, RunState

AVRO_DIR = Path(__file__).parent / "avro"
HISTORY_DIR = AVRO_DIR / "history"
MAGIC = b"\xc3\x01"
NAMESPACE = "modelevents"

# Each file is self-contained (run_state defines Usage, the payload record of model_event, too).
CURRENT_FILES = ("model_event.avsc", "provider_frame.avsc", "run_state.avsc", "dead_letter.avsc")

# (record, field) of strings drawn from a small vocabulary, repeated from event to event (the
# tenant, provider, api and model, the kind, the adapter, roles and statuses, the response id of
# a message's deltas): the compiled encoders memoize their encodings (bounded, see avro_writer).
# Not the run id: consecutive memoized fields share one memo entry, and with the run id among
# them a worker interleaving many short runs missed that memo on nearly every event.
CACHED_STRINGS = frozenset({
    ("ModelEvent", "tenant"), ("ModelEvent", "provider"),
    ("ModelEvent", "api"), ("ModelEvent", "model"), ("ModelEvent", "kind"),
    ("ModelEvent", "adapter"), ("EventSource", "transport"), ("Envelope", "content_type"),
    ("RunStarted", "status"), ("RunStatus", "status"), ("RunStatus", "raw_status"),
    ("RunAwaiting", "reason"), ("RunAwaiting", "raw_reason"), ("RunFinished", "status"),
    ("RunFinished", "reason"), ("RunFinished", "raw_reason"),
    ("Message", "item_id"), ("Message", "role"), ("Message", "phase"),
    ("Text", "item_id"), ("Reasoning", "item_id"), ("Reasoning", "form"),
    ("Reasoning", "valid_for"), ("Media", "item_id"), ("Media", "mime_type"),
    ("ToolCall", "item_id"), ("ToolCall", "tool_name"), ("ToolCall", "tool_call_id"),
    ("Hosted", "tool_type"), ("Hosted", "authority"), ("Hosted", "executor"),
    ("Hosted", "status"), ("Hosted", "billable_unit"), ("Citation", "source_type"),
    ("Error", "error_type"), ("Error", "code"),
})


def _parse_record(raw: dict[str, Any], named: dict[str, Any]) -> dict[str, Any]:
    """``raw`` parsed by fastavro; every shipped schema file defines one record."""
    parsed = fastavro.parse_schema(raw, named)
    if not isinstance(parsed, dict):
        raise SchemaError(f"schema {raw.get('name')!r} is not an Avro record")
    return parsed


def fingerprint_of(parsed: dict[str, Any]) -> bytes:
    """CRC-64-AVRO of the Parsing Canonical Form, little-endian as the header carries it.

    ``parsed`` must be self-contained (parsed alone): the canonical form defines each named type
    in full where it is first used, and fastavro writes a type known from another schema as a
    bare name instead — the RunState fingerprint of modelevents ≤ v1 (see LEGACY_FINGERPRINTS).
    """
    return bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))


# Fingerprints that modelevents ≤ v1 wrote in headers although they are not the spec's, and the
# history file of the writer schema each named. v1 parsed run_state.avsc (which then referred to
# modelevents.Usage of model_event.avsc) in one namespace with model_event and hashed a canonical
# form naming Usage without defining it: 6cad731c9afff2f0 where official Avro computes
# 00f0530e69598914. The compacted `runs` topic keeps such records for ever, so they stay readable.
LEGACY_FINGERPRINTS: dict[bytes, str] = {
    bytes.fromhex("6cad731c9afff2f0"): "run_state.v1.avsc",
}


def without_logical_types(schema: Any) -> Any:
    """The schema with no ``logicalType``: the same binary form, read as plain values.

    The contract's timestamps are ``timestamp-millis`` longs and stay ``int`` in Python; fastavro
    would turn them into datetimes on read (by the writer schema's logical type), so every schema
    fastavro reads with loses its logical types first. The compiled reader and writer read the
    ``type`` alone and need no such copy."""
    if isinstance(schema, dict):
        return {k: without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [without_logical_types(s) for s in schema]
    return schema


def _is_timestamp(schema: Any) -> bool:
    """A timestamp-millis long, or a union of null and one."""
    branches = schema if isinstance(schema, list) else [schema]
    return any(isinstance(b, dict) and b.get("logicalType") == "timestamp-millis"
               for b in branches)


class SchemaSet:
    """The current reader schemas by record name and every known writer schema by fingerprint.

    Every file is self-contained and parsed alone (as a client given that one file parses it),
    so its fingerprint is the one official Avro computes."""

    def __init__(self, avro_dir: Path = AVRO_DIR) -> None:
        # The current schemas as shipped (logical types included): fastavro writes with them.
        self.current: dict[str, dict[str, Any]] = {}
        # The same without logical types: the reader schema of fastavro's resolution.
        self.plain: dict[str, dict[str, Any]] = {}
        self.current_fingerprint: dict[str, bytes] = {}
        # Fingerprint → (record name, writer schema without logical types, for fastavro).
        self.writers: dict[bytes, tuple[str, dict[str, Any]]] = {}
        # Python type name → compiled single-object encoder (magic + fingerprint + body).
        self.encoders: dict[str, Callable[[Any], bytes]] = {}
        # Fingerprint → (record name, compiled reader of a record it wrote): the current
        # fingerprints, and any other whose writer has the current canonical form.
        self.readers: dict[bytes, tuple[str, Callable[[bytes, int], dict[str, Any]]]] = {}
        # Fingerprint → compiled reader building the ModelEvent itself (payload, source,
        # envelope, piece and elided as their dataclasses): the consumers' hot path.
        self.event_readers: dict[bytes, Callable[[bytes, int], ModelEvent]] = {}
        # Record name → its top-level timestamp-millis fields (for readers that convert them).
        self.timestamp_fields: dict[str, tuple[str, ...]] = {}
        compiled_named: dict[str, Any] = {}
        canonical: dict[str, str] = {}  # current record name → its Parsing Canonical Form
        for name in CURRENT_FILES:
            raw = json.loads((avro_dir / name).read_text())
            named: dict[str, Any] = {}
            parsed = _parse_record(raw, named)
            full_name = parsed["name"]
            fp = fingerprint_of(parsed)
            self.current[full_name] = parsed
            self.plain[full_name] = _parse_record(without_logical_types(raw), {})
            self.current_fingerprint[full_name] = fp
            self.timestamp_fields[full_name] = tuple(
                f["name"] for f in raw["fields"] if _is_timestamp(f["type"]))
            canonical[full_name] = to_parsing_canonical_form(parsed)
            self.writers[fp] = (full_name, self.plain[full_name])
            # Records of the same short name (Usage, in model_event and run_state) are one record
            # defined twice (a test holds them equal): sharing their compiled functions is right.
            self.encoders[raw["name"]] = compile_encoder(raw, MAGIC + fp, compiled_named,
                                                         CACHED_STRINGS)
            self.readers[fp] = (full_name, compile_reader(parsed, named))
            if full_name == _MODELEVENT:
                try:
                    self.event_readers[fp] = compile_reader(parsed, named, EVENT_TYPES)
                except SchemaError:
                    pass  # fields the dataclasses lack (a schema under test): the dict path
        history = avro_dir / "history"
        by_file: dict[str, tuple[bytes, str, dict[str, Any]]] = {}
        for path in sorted(history.glob("*.avsc")) if history.is_dir() else ():
            # Each historical file is self-contained; parse it in its own namespace of names.
            raw = json.loads(path.read_text())
            parsed = _parse_record(without_logical_types(raw), {})
            fp = fingerprint_of(parsed)
            by_file[path.name] = (fp, parsed["name"], parsed)
            self.writers.setdefault(fp, (parsed["name"], parsed))
        for legacy, file_name in LEGACY_FINGERPRINTS.items():
            if file_name not in by_file:
                continue  # a test schema set without that history
            fp, full_name, parsed = by_file[file_name]
            self.writers.setdefault(legacy, (full_name, parsed))
            if full_name in canonical and to_parsing_canonical_form(parsed) == canonical[full_name]:
                # Written in today's binary form under its old name: the compiled reader reads it
                # at full speed (RunState v1 differs from v2 only by logical types).
                self.readers.setdefault(legacy, self.readers[self.current_fingerprint[full_name]])


_MODELEVENT = f"{NAMESPACE}.ModelEvent"
# Short record name → the class the typed reader builds a record of that name as.
EVENT_TYPES: dict[str, type] = {"ModelEvent": ModelEvent, "EventSource": EventSource,
                                 "Envelope": Envelope, "Piece": Piece, "Elided": Elided,
                                 **PAYLOAD_TYPES}


@cache
def schemas() -> SchemaSet:
    return SchemaSet()


# --- encoding ----------------------------------------------------------------------------------


def _event_record(event: ModelEvent) -> dict[str, Any]:
    src = event.source
    env = event.envelope
    return {
        "event_id": event.event_id,
        "run_id": event.run_id,
        "tenant": event.tenant,
        "provider": event.provider,
        "api": event.api,
        "model": event.model,
        "kind": event.kind,
        "seq": event.seq,
        "source": {"frame_id": src.frame_id, "index": src.index, "transport": src.transport,
                   "cursor": src.cursor},
        "received_at": event.received_at,
        "adapter": event.adapter,
        "envelope": {"content_type": env.content_type, "body": env.body},
        # Tuple notation names the union branch, so fastavro need not try each record in turn.
        "payload": (f"{NAMESPACE}.{type(event.payload).__name__}", payload_dict(event.payload)),
        "piece": (None if event.piece is None
                  else {"index": event.piece.index, "count": event.piece.count}),
        "elided": (None if event.elided is None
                   else {"field": event.elided.field, "from_kind": event.elided.from_kind,
                         "size": event.elided.size}),
    }


_USAGE_FIELDS = ("usage", "prior_calls_usage")  # RunState fields holding a Usage record


def _plain_record(obj: Any) -> dict[str, Any]:
    record = {f.name: getattr(obj, f.name) for f in fields(obj)}
    for name in _USAGE_FIELDS:
        if isinstance(record.get(name), Usage):
            record[name] = payload_dict(record[name])
    piece = record.get("piece")
    if isinstance(piece, FramePiece):
        record["piece"] = {"index": piece.index, "count": piece.count}
    return record


def _record_of(obj: Any) -> tuple[str, dict[str, Any]]:
    if isinstance(obj, ModelEvent):
        return f"{NAMESPACE}.ModelEvent", _event_record(obj)
    for cls in (ProviderFrame, RunState, DeadLetter):
        if isinstance(obj, cls):
            return f"{NAMESPACE}.{cls.__name__}", _plain_record(obj)
    raise SchemaError(f"no Avro schema for {type(obj).__name__}; expected ModelEvent, "
                      "ProviderFrame, RunState or DeadLetter")


_encoders: dict[str, Callable[[Any], bytes]] = {}  # schemas().encoders, once loaded


def encode(obj: ModelEvent | ProviderFrame | RunState | DeadLetter) -> bytes:
    """Single-object encoding of a contract record with the current schema."""
    # Once per event on the adapters' hot path: one dict lookup, one call.
    encoder: Callable[[Any], bytes] | None
    try:
        encoder = _encoders[type(obj).__name__]
    except KeyError:
        _encoders.update(schemas().encoders)
        # A subclass (the consumer API's LazyModelEvent) is encoded as the record it extends.
        encoder = next((_encoders[c.__name__] for c in type(obj).__mro__
                        if c.__name__ in _encoders), None)
        if encoder is not None:
            _encoders[type(obj).__name__] = encoder
        if encoder is None:
            raise SchemaError(f"no Avro schema for {type(obj).__name__}; expected ModelEvent, "
                              "ProviderFrame, RunState or DeadLetter") from None
    try:
        return encoder(obj)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise SchemaError(f"{type(obj).__name__} does not fit its Avro schema: {exc}") from exc


def encode_with_fastavro(obj: ModelEvent | ProviderFrame | RunState | DeadLetter) -> bytes:
    """The reference encoding by fastavro's own writer; the compiled writers must equal it."""
    name, record = _record_of(obj)
    schema_set = schemas()
    buf = io.BytesIO()
    buf.write(MAGIC)
    buf.write(schema_set.current_fingerprint[name])
    fastavro.schemaless_writer(buf, schema_set.current[name], record)
    return buf.getvalue()


# --- decoding ----------------------------------------------------------------------------------


_event_readers: dict[bytes, Callable[[bytes, int], ModelEvent]] = {}  # schemas().event_readers by header, once loaded


def decode(data: bytes) -> ModelEvent | ProviderFrame | RunState | DeadLetter:
    """Decode a single-object-encoded record written by any known version of its schema."""
    # Once per event on the consumers' hot path: a ModelEvent of the current schema is built by
    # its typed reader with one lookup by the header's bytes (magic included: it must match).
    typed = _event_readers.get(data[:10]) if type(data) is bytes else None
    if typed is not None:
        try:
            event = typed(data, 10)
        except CorruptRecord as exc:
            raise SchemaError(f"corrupt {_MODELEVENT} record ({len(data)} bytes): {exc}") from exc
        expected = KIND_PAYLOAD.get(event.kind)
        if expected is not None and expected is not type(event.payload):
            raise SchemaError(f"event {event.event_id}: kind {event.kind} carries a "
                              f"{type(event.payload).__name__} payload, "
                              f"expected {expected.__name__}")
        return event
    if not _event_readers:
        _event_readers.update((MAGIC + fp, read)
                              for fp, read in schemas().event_readers.items())
        if _event_readers and type(data) is bytes and data[:10] in _event_readers:
            return decode(data)
    if len(data) < 10 or data[:2] != MAGIC:
        raise SchemaError(
            f"not an Avro single-object record: expected magic C3 01, got {data[:2].hex(' ') or 'nothing'}"
            f" ({len(data)} bytes)")
    fp = bytes(data[2:10])
    schema_set = schemas()
    if fp in schema_set.event_readers:  # bytes-like, not bytes: as bytes, the typed reader
        return decode(bytes(data))
    current = schema_set.readers.get(fp)
    if current is not None:  # written with the current schema: the compiled reader
        name, read = current
        try:
            record = read(data if type(data) is bytes else bytes(data), 10)
        except CorruptRecord as exc:
            raise SchemaError(f"corrupt {name} record ({len(data)} bytes): {exc}") from exc
        return _from_record(name, record)
    known = schema_set.writers.get(fp)
    if known is None:
        raise UnknownSchemaError(
            f"writer schema with fingerprint {fp.hex()} is not among the shipped schemas; "
            "a newer modelevents wrote it — upgrade this reader")
    name, writer = known
    try:
        resolved = fastavro.schemaless_reader(
            io.BytesIO(data[10:]), writer, schema_set.plain[name],
            return_record_name=True, return_record_name_override=True)
    except Exception as exc:  # fastavro raises bare exceptions of many types on corrupt bodies
        raise SchemaError(f"corrupt {name} record ({len(data)} bytes): {exc}") from exc
    if not isinstance(resolved, dict):
        raise SchemaError(f"corrupt {name} record ({len(data)} bytes): not a record")
    return _from_record(name, resolved)


_PROVIDERFRAME, _RUNSTATE, _DEADLETTER = (
    f"{NAMESPACE}.{name}" for name in ("ProviderFrame", "RunState", "DeadLetter"))


def _from_record(name: str,
                 record: dict[str, Any]) -> ModelEvent | ProviderFrame | RunState | DeadLetter:
    if name == _MODELEVENT:
        payload_name, payload = record["payload"]
        cls = PAYLOAD_TYPES[payload_name.rsplit(".", 1)[-1]]
        expected = KIND_PAYLOAD.get(record["kind"])
        if expected is not None and expected is not cls:
            raise SchemaError(f"event {record['event_id']}: kind {record['kind']} carries a "
                              f"{cls.__name__} payload, expected {expected.__name__}")
        return ModelEvent(
            event_id=record["event_id"], run_id=record["run_id"], tenant=record["tenant"],
            provider=record["provider"], api=record["api"], model=record["model"],
            kind=record["kind"], seq=record["seq"], source=EventSource(**record["source"]),
            received_at=record["received_at"], adapter=record["adapter"],
            envelope=Envelope(**record["envelope"]), payload=cls(**payload),
            piece=None if record.get("piece") is None else Piece(**record["piece"]),
            elided=None if record.get("elided") is None else Elided(**record["elided"]))
    if name == _PROVIDERFRAME:
        piece = record.get("piece")
        if piece is not None:
            record["piece"] = FramePiece(**piece)
        return ProviderFrame(**record)
    if name == _RUNSTATE:
        for field_name in _USAGE_FIELDS:
            if record.get(field_name) is not None:
                record[field_name] = Usage(**record[field_name])
        return RunState(**record)
    if name == _DEADLETTER:
        return DeadLetter(**record)
    raise UnknownSchemaError(f"no Python type for record {name}")
