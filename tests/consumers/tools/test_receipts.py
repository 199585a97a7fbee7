"""ToolReceipt records (consumers/tools/receipts.py): the frozen sample of each version stays
readable (v1 with today's new fields at their defaults), the header is the spec's single-object
encoding, and the official Apache Avro library reads them."""

from __future__ import annotations

import datetime as dt
import io
import json
from dataclasses import asdict
from pathlib import Path

import avro.io
import avro.schema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.consumers.tools.receipts import (
    SCHEMA_PATH,
    ToolReceipt,
    decode_receipt,
    encode_receipt,
    encode_receipt_with_fastavro,
    is_receipt,
)
from modelevents.schemas.errors import SchemaError
from tests.schemas.test_interop import official_fingerprint

SAMPLES = Path(__file__).parent / "samples"
# The fields v2 added (an awaiting_approval receipt's), at their defaults.
V2_FIELDS = {"approval_id": None, "arguments_hash": None, "held_call": None}


def sample(version: int) -> dict[str, object]:
    expected = json.loads((SAMPLES / f"tool_receipt.v{version}.json").read_text())
    if isinstance(expected.get("held_call"), str):
        expected["held_call"] = bytes.fromhex(expected["held_call"])
    return {**V2_FIELDS, **expected}


@pytest.mark.parametrize("version", [1, 2])
def test_each_frozen_sample_decodes_to_what_was_written(version: int):
    data = (SAMPLES / f"tool_receipt.v{version}.bin").read_bytes()
    assert is_receipt(data)
    assert asdict(decode_receipt(data)) == sample(version)


def test_the_current_schema_is_v2():
    current = encode_receipt(ToolReceipt("op", "k", "r", "t", "n", "c", "1", 0, "started", 1))
    assert current[:10] == (SAMPLES / "tool_receipt.v2.bin").read_bytes()[:10]


def test_a_receipt_round_trips_and_the_official_avro_library_reads_it():
    receipt = ToolReceipt("op_1", "key", "run_1", "acme", "get_weather", "call_9", "1", 1,
                          "started", 1764770000000)
    data = encode_receipt(receipt)
    assert decode_receipt(data) == receipt
    schema = avro.schema.parse(SCHEMA_PATH.read_text())
    # Single-object encoding: C3 01, then the CRC-64-AVRO fingerprint official Avro computes.
    assert data[:2] == b"\xc3\x01"
    assert data[2:10].hex() == official_fingerprint(SCHEMA_PATH).hex()
    read = avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(io.BytesIO(data[10:])))
    assert read["operation_id"] == "op_1" and read["phase"] == "started"
    assert read["outcome"] is None and read["attempt"] == 1


def test_the_official_library_writes_what_the_executor_reads():
    schema = avro.schema.parse(SCHEMA_PATH.read_text())
    expected = sample(2)
    datum = {**expected, **{name: dt.datetime.fromtimestamp(expected[name] / 1000, dt.UTC)
                            for name in ("started_at", "finished_at")}}
    out = io.BytesIO()
    avro.io.DatumWriter(schema).write(datum, avro.io.BinaryEncoder(out))
    header = (SAMPLES / "tool_receipt.v2.bin").read_bytes()[:10]
    assert asdict(decode_receipt(header + out.getvalue())) == expected


def test_a_record_of_another_schema_is_refused_by_name():
    with pytest.raises(SchemaError, match="not a ToolReceipt"):
        decode_receipt(b"\xc3\x01" + bytes(8) + b"\x00")


def test_the_current_frozen_sample_encodes_to_its_bytes():
    assert encode_receipt(ToolReceipt(**sample(2))) == (SAMPLES / "tool_receipt.v2.bin").read_bytes()


_text = st.text(max_size=40)
_optional_text = st.none() | _text
_millis = st.integers(min_value=0, max_value=253_402_300_799_999)  # up to the year 9999


@settings(max_examples=300, deadline=None)
@given(st.builds(
    ToolReceipt, operation_id=_text, idempotency_key=_text, run_id=_text, tenant=_text,
    tool_name=_text, tool_call_id=_text, schema_version=_text,
    attempt=st.integers(min_value=-2**31, max_value=2**31 - 1),
    phase=st.sampled_from(["started", "finished", "awaiting_approval"]) | _text,
    started_at=_millis, finished_at=st.none() | _millis, outcome=_optional_text,
    external_id=_optional_text, postcondition=_optional_text, error_class=_optional_text,
    error=_optional_text, reconciled=st.booleans(), result=_optional_text,
    result_is_error=st.booleans(), cost=st.floats(allow_nan=False),
    approval_id=_optional_text, arguments_hash=_optional_text,
    held_call=st.none() | st.binary(max_size=40)))
def test_the_compiled_encoder_writes_fastavros_bytes(receipt: ToolReceipt):
    assert encode_receipt(receipt) == encode_receipt_with_fastavro(receipt)
    assert decode_receipt(encode_receipt(receipt)) == receipt


def test_a_receipt_that_breaks_the_schema_is_refused_by_name():
    with pytest.raises(SchemaError, match="ToolReceipt does not fit"):
        encode_receipt(ToolReceipt("op", "k", "r", "t", "n", "c", "1", None, "started", 1))  # type: ignore[arg-type]
