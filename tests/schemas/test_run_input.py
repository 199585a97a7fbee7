"""The input packet's record (schemas/avro/inputs/run_input.avsc) is readable by clients nobody
here wrote: the official Apache Avro library reads what schemas/run_input.py writes and the
other way round, the single-object header carries the fingerprint official Avro computes, and
the frozen samples of each version (run_input_samples/v1.*, v2.*, never rewritten) stay
decodable: a v1 packet (before ``bundle``) reads with no bundle."""

from __future__ import annotations

import datetime as dt
import io
import json
from dataclasses import asdict
from pathlib import Path

import avro.io
import avro.schema

from modelevents.schemas import run_input
from tests.schemas.test_interop import official_fingerprint

# Not under samples/: those are the events codec's, each read by codec.decode.
SAMPLE = Path(__file__).parent / "run_input_samples"
TIMESTAMPS = ("recorded_at", "expires_at")  # timestamp-millis: datetimes to official Avro
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _as_datetimes(record: dict) -> dict:
    return {k: (_EPOCH + dt.timedelta(milliseconds=v) if k in TIMESTAMPS and v is not None
                else v) for k, v in record.items()}


def _official_schema() -> avro.schema.RecordSchema:
    return avro.schema.parse(run_input.SCHEMA_PATH.read_text())


def _frozen(version: int = 2) -> tuple[bytes, dict]:
    return (SAMPLE / f"v{version}.bin").read_bytes(), json.loads(
        (SAMPLE / f"v{version}.json").read_text())


def test_the_schema_file_parses_alone_and_its_fingerprint_is_official_avros():
    assert _official_schema().fullname == "modelevents.RunInput"
    assert run_input.schema_fingerprint() == official_fingerprint(run_input.SCHEMA_PATH)


def test_the_frozen_sample_decodes_to_its_record():
    data, expected = _frozen()
    assert asdict(run_input.decode(data)) == expected
    assert run_input.encode(run_input.decode(data)) == data
    assert expected["bundle"].startswith("bnd-")


def test_a_v1_packet_reads_with_no_bundle_and_official_avro_reads_it_with_its_schema():
    data, expected = _frozen(1)
    assert run_input.is_run_input(data)
    assert data[2:10] != run_input.schema_fingerprint()
    assert asdict(run_input.decode(data)) == {**expected, "bundle": None}
    [v1] = run_input.HISTORY_PATHS
    assert data[2:10] == official_fingerprint(v1)
    record = avro.io.DatumReader(avro.schema.parse(v1.read_text())).read(
        avro.io.BinaryDecoder(io.BytesIO(data[10:])))
    assert record == _as_datetimes(expected)


def test_official_avro_reads_what_the_codec_writes():
    data, expected = _frozen()
    assert data[:2] == b"\xc3\x01" and data[2:10] == official_fingerprint(run_input.SCHEMA_PATH)
    reader = avro.io.DatumReader(_official_schema())
    record = reader.read(avro.io.BinaryDecoder(io.BytesIO(data[10:])))
    assert record == _as_datetimes(expected)


def test_the_codec_reads_what_official_avro_writes():
    _data, expected = _frozen()
    expected = {**expected, "run_id": "run_official", "cancellable_by": [], "expires_at": None}
    out = io.BytesIO()
    avro.io.DatumWriter(_official_schema()).write(_as_datetimes(expected),
                                                  avro.io.BinaryEncoder(out))
    header = b"\xc3\x01" + official_fingerprint(run_input.SCHEMA_PATH)
    assert asdict(run_input.decode(header + out.getvalue())) == expected


def test_the_stored_request_is_canonical_json_and_its_fingerprint_sha256():
    _data, expected = _frozen()
    doc = json.loads(expected["request"])
    assert expected["request"] == json.dumps(doc, sort_keys=True, separators=(",", ":"),
                                             ensure_ascii=False)
    assert run_input.request_fingerprint(expected["request"]) == expected["fingerprint"]
    assert "run_id" not in doc
