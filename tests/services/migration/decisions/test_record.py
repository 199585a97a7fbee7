"""The decision record (schemas/decision_record.py) is readable by clients nobody
here wrote: the official Apache Avro library reads what the codec writes and the other way
round, the single-object header carries the fingerprint official Avro computes from the shipped
file alone (and Java's BinaryMessageDecoder, given that file, decodes it), and the frozen sample
(samples/decision.v1.*, never rewritten) stays decodable."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import avro.io
import avro.schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.schemas.decision_record import (
    SCHEMA_PATH,
    Availability,
    Decision,
    DecisionTarget,
    Demotion,
    RetestTriggers,
    decision_from_dict,
    decode_decision,
    encode_decision,
    is_decision,
)
from modelevents.schemas.errors import SchemaError
from tests.schemas.test_interop import official_fingerprint

SAMPLES = Path(__file__).parent / "samples"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _frozen() -> tuple[bytes, dict[str, Any]]:
    return ((SAMPLES / "decision.v1.bin").read_bytes(),
            json.loads((SAMPLES / "decision.v1.json").read_text()))


def _official() -> avro.schema.RecordSchema:
    return avro.schema.parse(SCHEMA_PATH.read_text())


def _as_datetimes(record: dict[str, Any]) -> dict[str, Any]:
    """timestamp-millis as the official library holds them: aware datetimes."""
    out = {**record}
    for name in ("decided_at", "updated_at"):
        out[name] = _EPOCH + dt.timedelta(milliseconds=record[name])
    if record["demotion"] is not None:
        out["demotion"] = {**record["demotion"],
                           "at": _EPOCH + dt.timedelta(milliseconds=record["demotion"]["at"])}
    return out


def test_the_schema_file_parses_alone_and_the_header_is_official_avros_fingerprint():
    assert _official().fullname == "modelevents.migration.Decision"
    data, _ = _frozen()
    assert data[:2] == b"\xc3\x01" and data[2:10] == official_fingerprint(SCHEMA_PATH)


def test_the_frozen_sample_decodes_to_its_record_and_encodes_to_its_bytes():
    data, expected = _frozen()
    decision = decode_decision(data)
    assert decision.as_dict() == expected
    assert decision.demotion is not None and decision.demotion.offset == 18446
    assert encode_decision(decision) == data


def test_official_avro_reads_what_the_codec_writes():
    data, expected = _frozen()
    record = avro.io.DatumReader(_official()).read(avro.io.BinaryDecoder(io.BytesIO(data[10:])))
    assert record == _as_datetimes(expected)


def test_the_codec_reads_what_official_avro_writes():
    _, expected = _frozen()
    expected = {**expected, "decision_id": "dec-official", "revision": 0, "status": "current",
                "demotion": None}
    out = io.BytesIO()
    avro.io.DatumWriter(_official()).write(_as_datetimes(expected), avro.io.BinaryEncoder(out))
    header = b"\xc3\x01" + official_fingerprint(SCHEMA_PATH)
    assert decode_decision(header + out.getvalue()).as_dict() == expected


def test_a_record_of_another_schema_is_refused_by_name():
    assert not is_decision(b"\xc3\x01" + bytes(8))
    with pytest.raises(SchemaError, match="not a Decision"):
        decode_decision(b"\xc3\x01" + bytes(8) + b"\x00")


def test_a_cut_record_is_refused_not_half_read():
    data, _ = _frozen()
    with pytest.raises(SchemaError, match="cannot be read"):
        decode_decision(data[:40])


def test_a_decision_that_breaks_the_schema_is_refused_by_name():
    decision = decode_decision(_frozen()[0])
    broken = decision_from_dict({**decision.as_dict(), "revision": "one"})
    with pytest.raises(SchemaError, match="does not fit its Avro schema"):
        encode_decision(broken)


_text = st.text(max_size=20)
_opt = st.none() | _text
_ms = st.integers(min_value=0, max_value=253_402_300_799_999)
_rate = st.none() | st.floats(min_value=0, max_value=1)


@settings(max_examples=200, deadline=None)
@given(st.builds(
    Decision, decision_id=_text, revision=st.integers(0, 2**31 - 1), bundle_id=_text,
    bundle_name=_text, target=st.builds(DecisionTarget, _text, _text, _text, _opt),
    required_capabilities=st.lists(_text, max_size=3),
    availability=st.builds(Availability, st.integers(0, 2**40), st.integers(0, 2**40),
                           st.floats(0, 1), st.floats(0, 1)),
    evidence=st.lists(_text, max_size=2), eval_results=st.lists(_text, max_size=2),
    exceptions=st.lists(_text, max_size=2), owner=_text,
    triggers=st.builds(RetestTriggers, _opt, st.dictionaries(_text, _text, max_size=2), _opt,
                       st.dictionaries(_text, _text, max_size=2), _opt, _rate, _rate),
    status=st.sampled_from(["current", "historical"]), decided_at=_ms, updated_at=_ms,
    demotion=st.none() | st.builds(Demotion, _text, _text, _ms, _opt, _opt, _opt, _opt, _opt,
                                   st.none() | st.integers(0, 2**31 - 1),
                                   st.none() | st.integers(0, 2**63 - 1))))
def test_every_decision_round_trips(decision: Decision):
    assert decode_decision(encode_decision(decision)) == decision


@pytest.mark.kafka  # needs java and mvn, as the broker does (tests/consumers/replay/...interop)
def test_the_java_reference_implementation_decodes_a_decision(tmp_path: Path):
    """Java's BinaryMessageDecoder, given only the shipped schema file, computes the fingerprint
    itself and decodes the frozen sample and a fresh record the codec writes."""
    import shutil
    import subprocess

    from tests.consumers.replay.test_archive_interop import MESSAGE_READER, avro_jars

    data, expected = _frozen()
    fresh = encode_decision(decision_from_dict({**expected, "revision": 0, "status": "current",
                                                "demotion": None}))
    (tmp_path / "frozen.bin").write_bytes(data)
    (tmp_path / "fresh.bin").write_bytes(fresh)
    source = tmp_path / "ReadMessages.java"
    source.write_text(MESSAGE_READER)
    proc = subprocess.run([shutil.which("java") or "java", "-cp", f"{avro_jars()}/*",
                           str(source), str(SCHEMA_PATH), str(tmp_path / "frozen.bin"),
                           str(tmp_path / "fresh.bin")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"schema modelevents.migration.Decision {data[2:10].hex()}",
        f"read frozen.bin updated_at={expected['updated_at']}",  # the one field the reader prints
        f"read fresh.bin updated_at={expected['updated_at']}"]
