"""ToolReceipt records (consumers/tools/receipts.py): a frozen sample stays readable, the header
is the spec's single-object encoding, and the official Apache Avro library reads them."""

from __future__ import annotations

import datetime as dt
import io
import json
from dataclasses import asdict
from pathlib import Path

import avro.io
import avro.schema
import pytest

from modelevents.consumers.tools.receipts import (
    SCHEMA_PATH,
    ToolReceipt,
    decode_receipt,
    encode_receipt,
)
from modelevents.schemas.errors import SchemaError
from tests.schemas.test_interop import official_fingerprint

SAMPLES = Path(__file__).parent / "samples"


def test_the_frozen_v1_sample_decodes_to_what_was_written():
    data = (SAMPLES / "tool_receipt.v1.bin").read_bytes()
    expected = json.loads((SAMPLES / "tool_receipt.v1.json").read_text())
    assert asdict(decode_receipt(data)) == expected


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
    expected = json.loads((SAMPLES / "tool_receipt.v1.json").read_text())
    datum = {**expected, **{name: dt.datetime.fromtimestamp(expected[name] / 1000, dt.UTC)
                            for name in ("started_at", "finished_at")}}
    out = io.BytesIO()
    avro.io.DatumWriter(schema).write(datum, avro.io.BinaryEncoder(out))
    header = (SAMPLES / "tool_receipt.v1.bin").read_bytes()[:10]
    assert asdict(decode_receipt(header + out.getvalue())) == expected


def test_a_record_of_another_schema_is_refused_by_name():
    with pytest.raises(SchemaError, match="not a ToolReceipt"):
        decode_receipt(b"\xc3\x01" + bytes(8) + b"\x00")
