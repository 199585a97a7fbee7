"""The CapabilityProbe record (``schemas/avro/migration/capability_probe.avsc``): what one
``capabilities probe`` observed of a target, its id, its JSON form and its Avro codec.

    record = CapabilityProbe(provider=…, observations=[CapabilityObservation(…), …], …)
    record = record.with_id()          # probe_id: prb- + SHA-256 of the canonical JSON
    data = encode(record)              # C3 01 | CRC-64-AVRO fingerprint | Avro body
    decode(data) == record
    record.as_json()                   # the same fields, probed_at also as ISO 8601

Written on the compacted ``<prefix>capability-probes`` topic, key probe_id; a decision record
cites a probe by its id as evidence of what the provider actually did.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import orjson

from modelevents.schemas.codec import AVRO_DIR
from modelevents.schemas.run_input import SingleObjectCodec

__all__ = ["CapabilityProbe", "CapabilityObservation", "Verdict", "SCHEMA_PATH", "TOPIC",
           "encode", "decode", "is_probe"]

SCHEMA_PATH: Path = AVRO_DIR / "migration" / "capability_probe.avsc"
TOPIC = "capability-probes"
Verdict = Literal["confirmed", "contradicted", "inconclusive"]
_CODEC = SingleObjectCodec(SCHEMA_PATH, "CapabilityProbe")


@dataclass(frozen=True, slots=True)
class CapabilityObservation:
    capability: str
    claimed: bool
    observed: Verdict
    evidence: str
    event_kinds: list[str] = field(default_factory=list)
    run_id: str | None = None
    error: str | None = None
    http_status: int | None = None
    model_snapshot: str | None = None


@dataclass(frozen=True, slots=True)
class CapabilityProbe:
    provider: str
    api: str
    model: str
    gateway: str
    manifest_entry: str
    probed_at: int  # epoch milliseconds
    requests_sent: int
    observations: list[CapabilityObservation]
    model_snapshots: list[str] = field(default_factory=list)
    api_revision: str | None = None
    account: str | None = None
    region: str | None = None
    probe_id: str = ""

    def with_id(self) -> CapabilityProbe:
        """The record with its content-addressed ``probe_id``."""
        doc = asdict(self)
        del doc["probe_id"]
        digest = hashlib.sha256(orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)).hexdigest()
        return replace(self, probe_id=f"prb-{digest}")

    @property
    def contradicted(self) -> list[CapabilityObservation]:
        return [o for o in self.observations if o.observed == "contradicted"]

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["probed_at_iso"] = dt.datetime.fromtimestamp(
            self.probed_at / 1000, dt.UTC).isoformat(timespec="milliseconds")
        return doc


def encode(record: CapabilityProbe) -> bytes:
    return _CODEC.encode(asdict(record))


def decode(data: bytes) -> CapabilityProbe:
    doc = _CODEC.decode(data)
    observations = [CapabilityObservation(**o) for o in doc.pop("observations")]
    return CapabilityProbe(**doc, observations=observations)


def is_probe(data: bytes | None) -> bool:
    """Whether ``data``'s header names the CapabilityProbe schema."""
    return _CODEC.matches(data)
