"""The CapabilityProbe record (schemas/avro/migration/capability_probe.avsc) is readable by
clients nobody here wrote: official Apache Avro reads what services/migration/probes/record.py
writes and the other way round, the single-object header carries the fingerprint official Avro
computes, the frozen sample of v1 (samples/capability_probe.v1.*, never rewritten) stays
decodable, and the probe id is the SHA-256 of the record's content."""

from __future__ import annotations

import datetime as dt
import io
import json
from dataclasses import asdict, replace
from pathlib import Path

import avro.io
import avro.schema
import pytest

from modelevents.schemas.errors import SchemaError
from modelevents.services.migration.probes import record as rec
from tests.schemas.test_interop import official_fingerprint

SAMPLES = Path(__file__).parent / "samples"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _frozen() -> tuple[bytes, dict]:
    return ((SAMPLES / "capability_probe.v1.bin").read_bytes(),
            json.loads((SAMPLES / "capability_probe.v1.json").read_text()))


def _official_schema() -> avro.schema.RecordSchema:
    return avro.schema.parse(rec.SCHEMA_PATH.read_text())


def _as_datum(doc: dict) -> dict:
    return {**doc, "probed_at": _EPOCH + dt.timedelta(milliseconds=doc["probed_at"])}


def test_the_schema_file_parses_alone_with_official_avro():
    assert _official_schema().fullname == "modelevents.CapabilityProbe"


def test_the_frozen_sample_decodes_to_its_record_and_encodes_to_its_bytes():
    data, expected = _frozen()
    assert asdict(rec.decode(data)) == expected
    assert rec.encode(rec.decode(data)) == data
    assert rec.is_probe(data)


def test_official_avro_reads_what_the_codec_writes():
    data, expected = _frozen()
    assert data[:2] == b"\xc3\x01" and data[2:10] == official_fingerprint(rec.SCHEMA_PATH)
    reader = avro.io.DatumReader(_official_schema())
    assert reader.read(avro.io.BinaryDecoder(io.BytesIO(data[10:]))) == _as_datum(expected)


def test_the_codec_reads_what_official_avro_writes():
    _data, expected = _frozen()
    expected = {**expected, "account": None, "observations": expected["observations"][:1]}
    out = io.BytesIO()
    avro.io.DatumWriter(_official_schema()).write(_as_datum(expected), avro.io.BinaryEncoder(out))
    header = b"\xc3\x01" + official_fingerprint(rec.SCHEMA_PATH)
    assert asdict(rec.decode(header + out.getvalue())) == expected


def test_the_probe_id_is_the_hash_of_the_content():
    data, _ = _frozen()
    record = rec.decode(data)
    assert record.with_id() == record  # the frozen id is the one its content gives
    other = replace(record, requests_sent=record.requests_sent + 1).with_id()
    assert other.probe_id != record.probe_id and other.probe_id.startswith("prb-")


def test_a_record_of_another_schema_is_refused():
    with pytest.raises(SchemaError, match="CapabilityProbe"):
        rec.decode(b"\xc3\x01" + b"\x00" * 8 + b"\x02")
    assert not rec.is_probe(b"{}")
