"""Readable by clients nobody here wrote (issue #11 §4): the official Apache Avro library reads
what the codec writes, and the codec reads what it writes.

The single-object header is the spec's: C3 01, then the CRC-64-AVRO fingerprint of the writer
schema's Parsing Canonical Form (little-endian). A client that knows the schema file computes
that fingerprint itself and refuses a record whose header names another — Java's
``BinaryMessageDecoder`` does — so each fingerprint must be the one official Avro computes from
the shipped file alone, and each file must parse alone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import avro.io
import avro.schema
import fastavro
import pytest

from modelevents.schemas import codec
from modelevents.schemas import events as ev
from modelevents.schemas.run_state import RunState
from tests.paths import SCHEMA_SAMPLES
from tests.schemas.sample_records import PAYLOADS, model_event, other_records

CURRENT = sorted(codec.AVRO_DIR.glob("*.avsc"))
HISTORY = sorted(codec.HISTORY_DIR.glob("*.avsc"))
SAMPLES = SCHEMA_SAMPLES

# Every epoch-millisecond long of the contract, by record (checked against the schemas below).
TIMESTAMPS = {
    "modelevents.ModelEvent": {"received_at"},
    "modelevents.ProviderFrame": {"received_at"},
    "modelevents.RunState": {"started_at", "updated_at", "finished_at"},
    "modelevents.DeadLetter": {"at"},
}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _strip_logical_types(schema: Any) -> Any:
    # The oracle's own copy, not codec.without_logical_types: the test must not trust the code
    # it checks.
    if isinstance(schema, dict):
        return {k: _strip_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_strip_logical_types(s) for s in schema]
    return schema


def official_fingerprint(path: Path) -> bytes:
    """CRC-64-AVRO of the file's Parsing Canonical Form, by the official avro package.

    The spec's [STRIP] step keeps only type, name, fields, symbols, items, values and size, and
    [PRIMITIVES] writes a primitive as its bare name, so ``{"type": "long", "logicalType":
    "timestamp-millis"}`` is ``"long"`` in canonical form (Java's SchemaNormalization and
    fastavro agree; see the Java test in tests/consumers/replay/test_archive_interop.py). avro 1.12's
    Python ``canonical_form`` keeps ``{"type":"long"}`` for a primitive that carries any other
    attribute, against [PRIMITIVES]; stripping the logical types first gives it the spec's form.
    """
    raw = json.loads(path.read_text())
    return bytes(avro.schema.parse(json.dumps(_strip_logical_types(raw)))
                 .fingerprint("CRC-64-AVRO"))


FILES = {"modelevents.ModelEvent": codec.AVRO_DIR / "model_event.avsc",
         "modelevents.ProviderFrame": codec.AVRO_DIR / "provider_frame.avsc",
         "modelevents.RunState": codec.AVRO_DIR / "run_state.avsc",
         "modelevents.DeadLetter": codec.AVRO_DIR / "dead_letter.avsc"}


def official_schema(name: str) -> avro.schema.RecordSchema:
    return avro.schema.parse(FILES[name].read_text())


def _records() -> dict[str, Any]:
    records: dict[str, Any] = {f"model_event.{kind}": model_event(kind, seq=i)
                               for i, kind in enumerate(sorted(PAYLOADS))}
    records.update(other_records())
    return records


RECORDS = _records()


def full_name(obj: Any) -> str:
    return f"modelevents.{type(obj).__name__}"


def as_datum(obj: Any) -> dict[str, Any]:
    """The record as the official Python library holds it: dicts for records, timestamps as
    aware datetimes (avro converts ``timestamp-millis`` both ways)."""
    datum = dataclasses.asdict(obj)
    for field in TIMESTAMPS[full_name(obj)]:
        if datum[field] is not None:
            datum[field] = _EPOCH + dt.timedelta(milliseconds=datum[field])
    return datum


class NamedBranchWriter(avro.io.DatumWriter):
    """A DatumWriter told which record of a union a value is, as a Java GenericRecord is (it
    carries its schema): avro's Python writer otherwise takes the last branch the dict validates
    against, and a Reasoning dict validates as a Text."""

    def write(self, datum, encoder):  # type: ignore[no-untyped-def]
        # The upfront validation of the whole datum knows no tagged branch; write_data still
        # refuses every value that does not fit its type.
        self.write_data(self.writers_schema, datum, encoder)

    def write_union(self, writers_schema, datum, encoder):  # type: ignore[no-untyped-def]
        if isinstance(datum, tuple):
            name, value = datum
            for i, branch in enumerate(writers_schema.schemas):
                if getattr(branch, "fullname", None) == name:
                    encoder.write_long(i)
                    return self.write_data(branch, value, encoder)
            raise AssertionError(f"no branch {name} in the union")
        return super().write_union(writers_schema, datum, encoder)


# --- the schema files ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", CURRENT + HISTORY, ids=lambda p: p.relative_to(codec.AVRO_DIR).as_posix())
def test_every_schema_file_parses_alone_with_official_avro(path):
    """A client given one file can read its records: no file refers to a type another defines
    (run_state used modelevents.Usage of model_event.avsc; Java's Schema.Parser refused it)."""
    assert avro.schema.parse(path.read_text()).fullname.startswith("modelevents.")


@pytest.mark.parametrize("path", CURRENT, ids=lambda p: p.name)
def test_current_fingerprints_are_what_official_avro_computes(path):
    name = avro.schema.parse(path.read_text()).fullname
    assert codec.schemas().current_fingerprint[name].hex() == official_fingerprint(path).hex()


@pytest.mark.parametrize("path", HISTORY, ids=lambda p: p.name)
def test_history_fingerprints_are_what_official_avro_computes(path):
    assert official_fingerprint(path) in codec.schemas().writers


def test_usage_is_one_record_in_both_files():
    """RunState defines Usage itself (self-contained), and it must stay the payload's Usage:
    both decode to schemas.events.Usage."""
    event = json.loads((codec.AVRO_DIR / "model_event.avsc").read_text())
    payloads = next(f for f in event["fields"] if f["name"] == "payload")["type"]
    usage = next(r for r in payloads if r["name"] == "Usage")
    state = json.loads((codec.AVRO_DIR / "run_state.avsc").read_text())
    defined = [b for f in state["fields"] if isinstance(f["type"], list)
               for b in f["type"] if isinstance(b, dict) and b.get("name") == "Usage"]
    assert defined == [usage]


def test_every_epoch_millisecond_long_says_its_unit():
    found: dict[str, set[str]] = {}
    for path in CURRENT:
        raw = json.loads(path.read_text())
        for field in raw["fields"]:
            types = field["type"] if isinstance(field["type"], list) else [field["type"]]
            if any(isinstance(t, dict) and t.get("logicalType") == "timestamp-millis"
                   and t.get("type") == "long" for t in types):
                found.setdefault(f"{raw['namespace']}.{raw['name']}", set()).add(field["name"])
    assert found == TIMESTAMPS


# --- the codec writes, official avro reads ------------------------------------------------------


@pytest.mark.parametrize("key", sorted(RECORDS))
def test_official_avro_reads_what_the_codec_writes(key):
    obj = RECORDS[key]
    data = codec.encode(obj)
    schema = official_schema(full_name(obj))
    assert data[:2] == b"\xc3\x01"
    # What BinaryMessageDecoder checks before it reads a byte of the body.
    assert data[2:10].hex() == official_fingerprint(FILES[full_name(obj)]).hex()
    decoder = avro.io.BinaryDecoder(io.BytesIO(data[10:]))
    read = avro.io.DatumReader(schema).read(decoder)
    assert decoder.reader.read() == b"", "the body holds more than the record"
    assert read == as_datum(obj)


# --- official avro writes, the codec reads ------------------------------------------------------


def _tagged(obj: Any, datum: dict[str, Any]) -> dict[str, Any]:
    if isinstance(obj, ev.ModelEvent):
        datum["payload"] = (f"modelevents.{type(obj.payload).__name__}", datum["payload"])
    return datum


@pytest.mark.parametrize("key", sorted(RECORDS))
def test_the_codec_reads_what_official_avro_writes(key):
    obj = RECORDS[key]
    name = full_name(obj)
    schema = official_schema(name)
    buf = io.BytesIO()
    NamedBranchWriter(schema).write(_tagged(obj, as_datum(obj)), avro.io.BinaryEncoder(buf))
    data = b"\xc3\x01" + official_fingerprint(FILES[name]) + buf.getvalue()
    assert codec.decode(data) == obj
    assert data == codec.encode(obj)  # and the very bytes the codec writes


# --- records written under the fingerprints before the fix --------------------------------------


def test_runs_records_written_under_the_old_fingerprint_still_decode():
    """modelevents v1 wrote RunState with 6cad731c9afff2f0 (the canonical form named Usage
    without defining it); the compacted `runs` topic keeps such records for ever."""
    sample = (SAMPLES / "v1" / "run_state.bin").read_bytes()
    assert sample[2:10].hex() == "6cad731c9afff2f0"
    state = codec.decode(sample)
    assert isinstance(state, RunState) and state.run_id == "run-1"
    assert state.usage == ev.Usage(input_tokens=10, output_tokens=5)
    # Any RunState of v2 (v1's binary form) re-headed with the old fingerprint reads the same,
    # resolved to today's schema (v3 added Usage.iterations, null for these).
    v2 = codec.schemas().writers[bytes.fromhex("00f0530e69598914")][1]
    record = codec._plain_record(other_records()["run_state"])
    for name in ("usage", "prior_calls_usage"):
        if record[name] is not None:
            record[name] = {k: v for k, v in record[name].items() if k != "iterations"}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, v2, record)
    legacy = b"\xc3\x01" + bytes.fromhex("6cad731c9afff2f0") + buf.getvalue()
    # v4's trust counts were not written: they read as their defaults.
    assert codec.decode(legacy) == dataclasses.replace(
        other_records()["run_state"], untrusted_sources=0, blocked_sources=0, policy_violations=0)
    assert codec.schemas().writers[bytes.fromhex("6cad731c9afff2f0")][0] == "modelevents.RunState"


def test_the_new_fingerprint_is_not_the_old():
    # v2's (the spec's, issue #11 §4) is history since v3 (Usage.iterations), v3's since v4
    # (the trust counts): both still read.
    fp = codec.schemas().current_fingerprint["modelevents.RunState"]
    assert fp.hex() == "e8c683f1d037ee70"
    assert codec.schemas().writers[bytes.fromhex("d5bfa97177249cb5")][0] == "modelevents.RunState"
    assert codec.schemas().writers[bytes.fromhex("00f0530e69598914")][0] == "modelevents.RunState"


def test_archives_give_timestamps_as_ints(tmp_path):
    """An archive's header carries model_event.avsc with its logical types, which fastavro
    reads as datetimes; read_archive gives the epoch-millisecond ints record_of gives."""
    from modelevents.consumers.replay import archive

    values = [codec.encode(model_event("text.done")), codec.encode(other_records()["provider_frame"])]
    out = tmp_path / "a.avro"
    with archive.ArchiveWriter(out, with_frames=True) as writer:
        for value in values:
            writer.write_value(value)
    read = [record for _, record in archive.read_archive(out)]
    assert [r["received_at"] for r in read] == [1_764_460_800_000] * 2
    assert all(type(r["received_at"]) is int for r in read)
    assert [archive.record_of(v)[1]["received_at"] for v in values] == [1_764_460_800_000] * 2
    assert [archive.value_of(n, r) for n, r in archive.read_archive(out)] == values
