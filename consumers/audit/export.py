"""``modelevents audit export DIR --format jsonl|parquet``: the archive for other tools.

Records come in chain order (the order they were archived). Only blocks that verify against
their manifest are exported; run ``audit verify`` first to know whether anything was left out.

jsonl — one object per record, exact: ``topic``, ``partition``, ``offset``, ``timestamp``
(Kafka log time, epoch ms), ``key`` and ``value`` (the Kafka value verbatim, Avro single-object
encoding) as standard base64 (RFC 4648, with padding), ``type`` (``event`` | ``frame`` |
``input`` | ``input_piece`` | ``receipt``) and ``record``: the decoded record, bytes fields
(``envelope.body``, ``body``, ``data``) as base64, the payload as
``{"type": "<PayloadRecord>", …fields}``; numbers are JSON integers and shortest-round-trip
doubles, so nothing is lost.

parquet (``pip install modelevents[audit]``) — one row per record: the same coordinates,
``key``/``value`` as binary, ``type``, ``tenant``, ``run_id``, ``seq``, ``kind``, ``event_id``,
``frame_id``, ``provider``, ``api``, ``model``, ``received_at``, and ``record`` as the JSON
text of the jsonl ``record``. The tool receipts are a table of their own, in a file beside it
(:func:`receipts_path`: ``a.parquet`` → ``a.receipts.parquet``): the coordinates and one column
per ToolReceipt field.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import orjson

from modelevents.consumers.audit.format import (
    RawRecord,
    archive_files,
    avro_path,
    decode_records,
    decompress,
    parse_header,
    read_long,
    read_manifest,
)
from modelevents.consumers.errors import AuditError
from modelevents.consumers.tools.receipts import ToolReceipt, decode_receipt, is_receipt
from modelevents.schemas import codec
from modelevents.schemas.events import ModelEvent, payload_dict
from modelevents.schemas.run_input import decode as decode_run_input
from modelevents.schemas.run_input import is_run_input
from modelevents.schemas.run_input_pieces import decode_piece, is_piece

FORMATS = ("jsonl", "parquet")


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _b64(bytes(value))
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def record_view(obj: Any) -> dict[str, Any]:
    out = _plain(obj)
    if isinstance(obj, ModelEvent):
        out["payload"] = {"type": type(obj.payload).__name__, **_plain(payload_dict(obj.payload))}
    return out


def archived_records(root: Path) -> Iterator[RawRecord]:
    """Every record of every block that matches its manifest, in chain order."""
    avros, manifests = archive_files(root)
    if not manifests:
        raise AuditError(f"{root} holds no audit archive files")
    blocks: list[tuple[int, Path, dict[str, Any]]] = []
    for mpath in manifests:
        for entry in read_manifest(mpath).blocks:
            blocks.append((entry["chain_index"], avro_path(mpath), entry))
    blocks.sort(key=lambda item: item[0])
    headers: dict[Path, Any] = {}
    for _, path, entry in blocks:
        if not path.exists():
            continue
        with open(path, "rb") as fo:
            if path not in headers:
                headers[path] = parse_header(fo.read(1 << 16))
            fo.seek(entry["start"])
            raw = fo.read(entry["length"])
        if hashlib.sha256(raw).hexdigest() != entry["sha256"]:
            continue
        count, pos = read_long(raw, 0)
        size, pos = read_long(raw, pos)
        yield from decode_records(decompress(headers[path].codec, raw[pos:pos + size]), count)


def _decoded(rec: RawRecord) -> tuple[str, Any]:
    if rec.value is not None and is_run_input(rec.value):  # an input packet (run_input.py)
        return "input", decode_run_input(rec.value)
    if is_piece(rec.value):  # a piece of one too large for a record (run_input_pieces.py)
        return "input_piece", decode_piece(rec.value)  # type: ignore[arg-type]
    if is_receipt(rec.value):  # the tool executor's (consumers/tools/receipts.py)
        return "receipt", decode_receipt(rec.value)  # type: ignore[arg-type]
    obj = codec.decode(rec.value) if rec.value is not None else None
    kind = "event" if isinstance(obj, ModelEvent) else "frame" if obj is not None else "none"
    return kind, obj


def export_jsonl(root: Path, out: TextIO) -> int:
    count = 0
    for rec in archived_records(root):
        kind, obj = _decoded(rec)
        line = {"topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
                "timestamp": rec.timestamp, "key": _b64(rec.key), "value": _b64(rec.value),
                "type": kind, "record": None if obj is None else record_view(obj)}
        out.write(orjson.dumps(line).decode())
        out.write("\n")
        count += 1
    return count


def receipts_path(path: Path) -> Path:
    """Where ``export_parquet`` writes the receipts table beside ``path``."""
    return path.with_name(f"{path.stem}.receipts{path.suffix or '.parquet'}")


_COORDINATES = [("topic", "string"), ("partition", "int32"), ("offset", "int64"),
                ("timestamp", "int64"), ("key", "binary"), ("value", "binary")]
_RECORDS = [*_COORDINATES, ("type", "string"), ("tenant", "string"), ("run_id", "string"),
            ("seq", "int64"), ("kind", "string"), ("event_id", "string"), ("frame_id", "string"),
            ("provider", "string"), ("api", "string"), ("model", "string"),
            ("received_at", "int64"), ("record", "string")]
_ARROW_TYPES = {int: "int64", str: "string", bool: "bool_", float: "float64", bytes: "binary"}
# One column per ToolReceipt field, typed by its annotation ("int | None" is an int64 column).
_RECEIPTS = [*_COORDINATES, *(
    (f.name, "int32" if f.name == "attempt" else next(
        arrow for py, arrow in _ARROW_TYPES.items() if py.__name__ in str(f.type).split(" | ")))
    for f in dataclasses.fields(ToolReceipt))]


class _Table:
    """Rows into one Parquet file, a row group every ``rows_per_group`` rows."""

    def __init__(self, pa: Any, pq: Any, path: Path, columns: list[tuple[str, str]],
                 rows_per_group: int) -> None:
        self.pa = pa
        self.schema = pa.schema([(name, getattr(pa, kind)()) for name, kind in columns])
        self.writer = pq.ParquetWriter(str(path), self.schema)
        self.columns: dict[str, list[Any]] = {name: [] for name in self.schema.names}
        self.rows_per_group = rows_per_group
        self.rows = 0

    def add(self, row: dict[str, Any]) -> None:
        for name, values in self.columns.items():
            values.append(row.get(name))
        self.rows += 1
        if len(self.columns["topic"]) >= self.rows_per_group:
            self.flush()

    def flush(self) -> None:
        self.writer.write_table(self.pa.table(self.columns, schema=self.schema))
        for values in self.columns.values():
            values.clear()

    def close(self) -> None:
        if self.columns["topic"] or self.rows == 0:
            self.flush()
        self.writer.close()


def export_parquet(root: Path, path: Path, rows_per_group: int = 50_000) -> int:
    """Every record into ``path``, the receipts into :func:`receipts_path` of it; the number of
    records written (receipts included)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise AuditError("Parquet export needs pyarrow: pip install modelevents[audit]") from None
    records = _Table(pa, pq, path, _RECORDS, rows_per_group)
    receipts = _Table(pa, pq, receipts_path(path), _RECEIPTS, rows_per_group)
    try:
        for rec in archived_records(root):
            kind, obj = _decoded(rec)
            where = {"topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
                     "timestamp": rec.timestamp, "key": rec.key, "value": rec.value}
            if isinstance(obj, ToolReceipt):
                receipts.add({**where, **dataclasses.asdict(obj)})
                continue
            is_event = isinstance(obj, ModelEvent)
            records.add({
                **where, "type": kind, "tenant": getattr(obj, "tenant", None),
                "run_id": obj.run_id if is_event else getattr(obj, "run_key", None),
                "seq": obj.seq if is_event else None,
                "kind": obj.kind if is_event else None,
                "event_id": obj.event_id if is_event else None,
                "frame_id": obj.source.frame_id if is_event else getattr(obj, "frame_id", None),
                "provider": getattr(obj, "provider", None), "api": getattr(obj, "api", None),
                "model": obj.model if is_event else None,
                "received_at": getattr(obj, "received_at", None),
                "record": None if obj is None else orjson.dumps(record_view(obj)).decode()})
    finally:
        records.close()
        receipts.close()
    return records.rows + receipts.rows
