"""The decision record: Avro (schemas/avro/migration/decision.avsc) in single-object encoding,
one revision per record on the compacted ``decisions`` topic keyed by ``decision_id``.

A decision is recorded at revision 0 with status ``current``; the watcher
(consumers/decisions/) writes revision n + 1 with status ``historical`` and the ``demotion`` —
which trigger fired, expected and observed values, and the record that showed it (run, event
id, topic, partition, offset). The latest revision of a key is the decision's state.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, cast

import fastavro

from modelevents.schemas.codec import AVRO_DIR, MAGIC, fingerprint_of, without_logical_types
from modelevents.schemas.errors import SchemaError

TOPIC = "decisions"  # compacted, key the decision id

__all__ = ["Decision", "DecisionTarget", "Availability", "RetestTriggers", "Demotion",
           "encode_decision", "decode_decision", "is_decision", "SCHEMA_PATH", "STATUSES",
           "TRIGGERS"]

SCHEMA_PATH: Path = AVRO_DIR / "migration" / "decision.avsc"
STATUSES = ("current", "historical")
# What can demote a decision, in the order the watcher checks an event.
TRIGGERS = ("model_snapshot", "event_adapter", "event_schema", "tool_contract", "capabilities",
            "unknown_event_rate", "needs_reconciliation_rate")


@dataclass(frozen=True)
class DecisionTarget:
    provider: str
    api: str
    model: str
    snapshot: str | None = None


@dataclass(frozen=True)
class Availability:
    runs: int = 0
    rejected: int = 0
    error_rate: float = 0.0
    refusal_rate: float = 0.0


@dataclass(frozen=True)
class RetestTriggers:
    model_snapshot: str | None = None
    event_adapters: dict[str, str] = field(default_factory=dict)
    event_schema: str | None = None
    tool_contracts: dict[str, str] = field(default_factory=dict)
    capabilities: str | None = None  # canonical JSON of the recorded manifest entry
    unknown_event_rate: float | None = None
    needs_reconciliation_rate: float | None = None


@dataclass(frozen=True)
class Demotion:
    trigger: str
    reason: str
    at: int  # epoch milliseconds
    expected: str | None = None
    observed: str | None = None
    run_id: str | None = None
    event_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True)
class Decision:
    decision_id: str
    revision: int
    bundle_id: str
    bundle_name: str
    target: DecisionTarget
    required_capabilities: list[str]
    availability: Availability
    evidence: list[str]
    eval_results: list[str]
    exceptions: list[str]
    owner: str
    triggers: RetestTriggers
    status: str
    decided_at: int  # epoch milliseconds
    updated_at: int
    demotion: Demotion | None = None

    @property
    def current(self) -> bool:
        return self.status == "current"

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form (``decide show --json``, the Markdown front matter)."""
        return asdict(self)


@cache
def _parsed() -> tuple[dict[str, Any], dict[str, Any], bytes]:
    raw = json.loads(SCHEMA_PATH.read_text())
    parsed = cast(dict[str, Any], fastavro.parse_schema(raw, {}))
    # Read without logical types: timestamps stay epoch-millisecond ints, as everywhere.
    plain = cast(dict[str, Any], fastavro.parse_schema(without_logical_types(raw), {}))
    return parsed, plain, MAGIC + fingerprint_of(parsed)


def header() -> bytes:
    """Magic and fingerprint: the first 10 bytes of every decision of this schema."""
    return _parsed()[2]


def encode_decision(decision: Decision) -> bytes:
    parsed, _, head = _parsed()
    out = io.BytesIO()
    out.write(head)
    try:
        fastavro.schemaless_writer(out, parsed, decision.as_dict())
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise SchemaError(f"Decision {decision.decision_id} does not fit its Avro schema: "
                          f"{exc}") from exc
    return out.getvalue()


def is_decision(data: bytes | None) -> bool:
    return data is not None and data[:10] == header()


def decode_decision(data: bytes) -> Decision:
    _, plain, head = _parsed()
    if data[:10] != head:
        raise SchemaError(f"not a Decision of this schema (header {data[:10].hex()}, expected "
                          f"{head.hex()})")
    try:
        record = cast(dict[str, Any], fastavro.schemaless_reader(io.BytesIO(data[10:]), plain))
    except (EOFError, ValueError, UnicodeDecodeError) as exc:
        raise SchemaError(f"a Decision record that cannot be read: {exc}") from exc
    return decision_from_dict(record)


def decision_from_dict(record: dict[str, Any]) -> Decision:
    """The dataclass of a record read by fastavro (or of its ``as_dict`` form)."""
    demotion = record.get("demotion")
    return Decision(**{**record,
                       "target": DecisionTarget(**record["target"]),
                       "availability": Availability(**record["availability"]),
                       "triggers": RetestTriggers(**record["triggers"]),
                       "demotion": Demotion(**demotion) if demotion is not None else None})
