"""The bundle's record (schemas/avro/migration/bundle.avsc) is readable by clients nobody here
wrote: official Apache Avro reads what schemas/bundle_record.py writes and the other way round,
the single-object header carries the fingerprint official Avro computes, the frozen sample of
v1 (bundle_samples/v1.*, never rewritten) stays decodable — and keeps its id: a change to the
Bundle model that changed the id of a bundle already on the topic fails here — and a record
whose content does not hash to the id it names is refused."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path

import avro.io
import avro.schema
import pytest

from modelevents.schemas import bundle_record
from modelevents.schemas.errors import SchemaError
from modelevents.schemas.run_input import SCHEMA_PATH as RUN_INPUT_SCHEMA
from tests.schemas.test_interop import official_fingerprint

SAMPLE = Path(__file__).parent / "bundle_samples"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _official_schema() -> avro.schema.RecordSchema:
    return avro.schema.parse(bundle_record.SCHEMA_PATH.read_text())


def _frozen() -> tuple[bytes, dict]:
    return (SAMPLE / "v1.bin").read_bytes(), json.loads((SAMPLE / "v1.json").read_text())


def _official_bytes(record: dict) -> bytes:
    datum = {**record, "created_at": _EPOCH + dt.timedelta(milliseconds=record["created_at"])}
    out = io.BytesIO()
    avro.io.DatumWriter(_official_schema()).write(datum, avro.io.BinaryEncoder(out))
    return b"\xc3\x01" + official_fingerprint(bundle_record.SCHEMA_PATH) + out.getvalue()


def test_the_schema_file_parses_alone_and_its_fingerprint_is_official_avros():
    assert _official_schema().fullname == "modelevents.migration.Bundle"
    assert bundle_record.schema_fingerprint() == official_fingerprint(bundle_record.SCHEMA_PATH)


def test_the_frozen_sample_decodes_to_its_record_and_keeps_its_id():
    data, expected = _frozen()
    stored = bundle_record.decode(data)
    assert bundle_record.record_of(stored.bundle, stored.created_at) == expected
    assert stored.bundle_id == expected["bundle_id"]
    assert stored.bundle.target.snapshot == "gpt-4o-mini-2024-07-18"
    assert stored.bundle.tools[0].declaration.parameters["required"] == ["order_id"]
    assert stored.bundle.sampling.structured_output.json_schema["type"] == "object"
    assert bundle_record.encode(stored.bundle, stored.created_at) == data


def test_official_avro_reads_what_the_codec_writes():
    data, expected = _frozen()
    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == official_fingerprint(bundle_record.SCHEMA_PATH)
    decoder = avro.io.BinaryDecoder(io.BytesIO(data[10:]))
    record = avro.io.DatumReader(_official_schema()).read(decoder)
    assert decoder.reader.read() == b"", "the body holds more than the record"
    assert record == {**expected,
                      "created_at": _EPOCH + dt.timedelta(milliseconds=expected["created_at"])}


def test_the_codec_reads_what_official_avro_writes():
    _data, expected = _frozen()
    stored = bundle_record.decode(_official_bytes({**expected, "created_at": 1}))
    assert stored.bundle_id == expected["bundle_id"] and stored.created_at == 1


def test_a_record_whose_content_does_not_hash_to_its_id_is_refused():
    _data, expected = _frozen()
    tampered = {**expected, "target": {**expected["target"], "snapshot": "gpt-4o-mini-2099"}}
    with pytest.raises(SchemaError, match="content hashes to .bnd-"):
        bundle_record.decode(_official_bytes(tampered))


def test_a_record_that_does_not_validate_is_refused_with_the_field():
    _data, expected = _frozen()
    bad = {**expected, "sampling": {**expected["sampling"], "temperature": 7.0}}
    with pytest.raises(SchemaError, match="sampling.temperature"):
        bundle_record.decode(_official_bytes(bad))


def test_a_record_of_another_schema_is_refused_by_name():
    other = b"\xc3\x01" + official_fingerprint(RUN_INPUT_SCHEMA) + b"\x00"
    assert not bundle_record.is_bundle_record(other)
    with pytest.raises(SchemaError, match="not a Bundle record"):
        bundle_record.decode(other)
