"""The eval result record (services/migration/eval/result.py, schemas/eval_results.py): the
frozen sample stays readable, the header is the spec's single-object encoding, the official
Apache Avro library reads what we write and writes what we read, and a record that breaks the
schema is refused."""

from __future__ import annotations

import io
import json
from pathlib import Path

import avro.io
import avro.schema
import pytest

from modelevents.schemas.errors import SchemaError
from modelevents.schemas.eval_results import SCHEMA_PATH, decode, encode, is_eval_result
from modelevents.services.migration.eval.result import result_id
from tests.schemas.test_interop import official_fingerprint

SAMPLES = Path(__file__).parent / "samples"


def sample() -> dict:
    return json.loads((SAMPLES / "eval_result.v1.json").read_text())


def test_the_frozen_sample_decodes_to_what_was_written():
    data = (SAMPLES / "eval_result.v1.bin").read_bytes()
    assert is_eval_result(data)
    assert decode(data) == sample()


def test_the_frozen_sample_encodes_to_its_bytes():
    assert encode(sample()) == (SAMPLES / "eval_result.v1.bin").read_bytes()


def test_the_id_names_the_content():
    record = sample()
    assert result_id(record) == record["result_id"]
    record["runs"][0]["success"] = not record["runs"][0]["success"]
    assert result_id(record) != record["result_id"]


def test_the_official_avro_library_reads_what_we_write():
    data = encode(sample())
    assert data[:2] == b"\xc3\x01"
    assert data[2:10].hex() == official_fingerprint(SCHEMA_PATH).hex()
    schema = avro.schema.parse(SCHEMA_PATH.read_text())
    read = avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(io.BytesIO(data[10:])))
    assert read == sample()


def test_we_read_what_the_official_avro_library_writes():
    schema = avro.schema.parse(SCHEMA_PATH.read_text())
    out = io.BytesIO()
    avro.io.DatumWriter(schema).write(sample(), avro.io.BinaryEncoder(out))
    header = (SAMPLES / "eval_result.v1.bin").read_bytes()[:10]
    assert decode(header + out.getvalue()) == sample()


def test_a_record_that_breaks_the_schema_is_refused():
    record = sample()
    del record["corpus"]
    with pytest.raises(SchemaError, match="breaks its schema"):
        encode(record)


def test_a_record_of_another_schema_is_refused_by_name():
    with pytest.raises(SchemaError, match="not a EvalResult"):
        decode(b"\xc3\x01" + bytes(8) + b"\x00")
