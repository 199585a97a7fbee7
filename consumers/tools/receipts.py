"""ToolReceipt records: one ``started`` and one ``finished`` record per attempt, on the
``receipts`` topic, keyed by run id (schemas/avro/tools/tool_receipt.avsc).

Encoded as Avro single-object encoding (``C3 01`` + the CRC-64-AVRO fingerprint of the schema's
Parsing Canonical Form, as every record of the contract; schemas/codec.py). What each outcome
means:

    succeeded   the tool ran and its postcondition was confirmed (or it has none: not_checked)
    failed      the tool answered that it did not do it (permanent error, exhausted retries,
                a violated postcondition, an output that broke its schema)
    unknown     the tool may have acted and nobody knows (a timeout after the write was sent,
                no reconcile hook or the hook could not tell); the model is told so

A ``started`` attempt with no ``finished`` record (the executor died mid-call) is read as
unknown: the next executor reconciles it before it tries again; a write without a reconcile hook
then ends ``unknown`` and is never run again. An ``awaiting_approval`` record
(attempt 0) says a call waits for an approval: which one, the arguments' hash, and the call
itself, so a restarted executor finds the call a decision names without reading ``events``.

Receipts written with an earlier version of the schema (``tools/history/``) are read as today's,
their new fields at their defaults.
"""

from __future__ import annotations

import datetime
import io
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

import fastavro

from modelevents.schemas.avro_writer import compile_encoder
from modelevents.schemas.codec import AVRO_DIR, MAGIC, fingerprint_of
from modelevents.schemas.errors import SchemaError

__all__ = ["ToolReceipt", "encode_receipt", "encode_receipt_with_fastavro", "decode_receipt",
           "is_receipt", "SCHEMA_PATH", "now_ms"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MILLISECOND = datetime.timedelta(milliseconds=1)

SCHEMA_PATH: Path = AVRO_DIR / "tools" / "tool_receipt.avsc"
HISTORY_DIR: Path = AVRO_DIR / "tools" / "history"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ToolReceipt:
    operation_id: str
    idempotency_key: str
    run_id: str
    tenant: str
    tool_name: str
    tool_call_id: str
    schema_version: str
    attempt: int
    phase: str  # started | finished | awaiting_approval
    started_at: int  # epoch milliseconds
    finished_at: int | None = None
    outcome: str | None = None  # succeeded | failed | unknown
    external_id: str | None = None
    postcondition: str | None = None  # confirmed | violated | not_checked
    error_class: str | None = None
    error: str | None = None
    reconciled: bool = False
    result: str | None = None
    result_is_error: bool = False
    cost: float = 0.0
    approval_id: str | None = None
    arguments_hash: str | None = None
    held_call: bytes | None = None


@cache
def _parsed() -> tuple[dict[str, Any], bytes]:
    raw = json.loads(SCHEMA_PATH.read_text())
    parsed = cast(dict[str, Any], fastavro.parse_schema(raw, {}))
    return parsed, MAGIC + fingerprint_of(parsed)


@cache
def _writers() -> dict[bytes, dict[str, Any]]:
    """Header (magic + fingerprint) → the writer schema of every version a receipt can have."""
    parsed, header = _parsed()
    found = {header: parsed}
    for path in sorted(HISTORY_DIR.glob("tool_receipt.*.avsc")):
        old = cast(dict[str, Any], fastavro.parse_schema(json.loads(path.read_text()), {}))
        found.setdefault(MAGIC + fingerprint_of(old), old)
    return found


# The strings a receipt repeats from call to call: memoized whole by the compiled writer.
_CACHED_STRINGS = [("ToolReceipt", name) for name in (
    "tenant", "tool_name", "schema_version", "phase", "postcondition", "error_class")]


@cache
def _encoder() -> Callable[[ToolReceipt], bytes]:
    """The compiled single-object encoder (schemas/avro_writer.py): it reads the receipt's
    attributes directly; three receipts a call made ``asdict``'s deep copy the executor's
    largest cost per call."""
    _, header = _parsed()
    return compile_encoder(json.loads(SCHEMA_PATH.read_text()), header, {}, _CACHED_STRINGS)


def encode_receipt(receipt: ToolReceipt) -> bytes:
    try:
        return _encoder()(receipt)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise SchemaError(f"ToolReceipt does not fit its Avro schema: {exc}") from exc


def encode_receipt_with_fastavro(receipt: ToolReceipt) -> bytes:
    """The reference encoding by fastavro's own writer; ``encode_receipt`` must equal it."""
    parsed, header = _parsed()
    out = io.BytesIO()
    out.write(header)
    fastavro.schemaless_writer(out, parsed, asdict(receipt))
    return out.getvalue()


def is_receipt(data: bytes | None) -> bool:
    """Whether ``data`` starts as a ToolReceipt of this schema or an earlier one does (magic
    and fingerprint)."""
    return data is not None and data[:10] in _writers()


def decode_receipt(data: bytes) -> ToolReceipt:
    parsed, _ = _parsed()
    writer = _writers().get(data[:10])
    if writer is None:
        raise SchemaError(f"not a ToolReceipt of this schema or an earlier one (header "
                          f"{data[:10].hex()})")
    record = cast(dict[str, Any],
                  fastavro.schemaless_reader(io.BytesIO(data[10:]), writer, parsed))
    for name in ("started_at", "finished_at"):
        value = record.get(name)
        if value is not None and not isinstance(value, int):
            # Exact: a float of seconds times 1000 loses a millisecond (4112.195 s → 4112194).
            record[name] = (value - _EPOCH) // _MILLISECOND
    return ToolReceipt(**record)
