"""An input packet too large for one record is cut into pieces (schemas/run_input_pieces.py) and
joined again; what a compacted topic can leave of a run's records (orphans of an earlier
revision, the latest write whole) reads as the latest packet. The records on the real broker:
tests/integration/gateway/test_input_packet.py."""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import replace

import avro.io
import avro.schema
import pytest

from modelevents.schemas.errors import SchemaError
from modelevents.schemas.limits import MAX_RECORD_BYTES, PIECE_BYTES
from modelevents.schemas.run_input import RedactionPolicy, RunInput, encode, request_fingerprint
from modelevents.schemas.run_input_pieces import (
    PIECE_SCHEMA_PATH,
    PacketAssembler,
    decode_piece,
    encode_piece,
    is_packet_key,
    is_piece,
    packet_records,
    tenant_of,
)
from tests.schemas.test_interop import official_fingerprint


def packet(text: str, revision: int = 0, run_id: str = "run_big") -> RunInput:
    request = json.dumps({"transcript": [{"role": "user", "parts": [
        {"type": "text", "text": text}]}]}, sort_keys=True, separators=(",", ":"))
    return RunInput(run_id=run_id, tenant="acme", origin="gateway", call="c0-1a2b3c4d",
                    revision=revision, recorded_at=1_700_000_000_000 + revision, request=request,
                    fingerprint=request_fingerprint(request), adapter="openai-responses@r",
                    provider="openai", api="openai-responses", model="m",
                    redaction=RedactionPolicy("default", ["api_key"], [], "f" * 64, 0))


BIG = "ünïcode and words " * 150_000  # ~3 MB of UTF-8: 4 pieces


def feed_all(records: list[tuple[str, bytes]], assembler: PacketAssembler | None = None
             ) -> PacketAssembler:
    assembler = assembler or PacketAssembler()
    for _key, value in records:
        assert assembler.accepts(value)
        assembler.feed(value)
    return assembler


def test_a_packet_that_fits_is_one_record_as_before():
    small = packet("Hello")
    assert packet_records(small) == [("run_big", encode(small))]
    assert feed_all(packet_records(small)).latest("run_big") == small


def test_a_big_packet_is_pieces_under_the_record_limit_keyed_apart_and_joins_again():
    big = packet(BIG)
    records = packet_records(big)
    whole = encode(big)
    assert len(whole) > MAX_RECORD_BYTES
    assert [k for k, _ in records] == ["run_big"] + [f"run_big#{i}" for i in
                                                     range(1, len(records))]
    assert len(records) == -(-len(whole) // PIECE_BYTES) >= 3
    assert all(len(v) < MAX_RECORD_BYTES and is_piece(v) for _, v in records)
    pieces = [decode_piece(v) for _, v in records]
    assert {(p.run_id, p.tenant, p.count, p.packet) for p in pieces} == {
        ("run_big", "acme", len(records), hashlib.sha256(whole).hexdigest())}
    assert (pieces[0].redaction_name, pieces[0].redaction_fingerprint) == ("default", "f" * 64)
    assert b"".join(p.data for p in pieces) == whole
    assert tenant_of(records[1][1]) == "acme" == tenant_of(encode(big))
    assembler = PacketAssembler()
    joined = [assembler.feed(v) for _, v in records]
    assert joined[:-1] == [None] * (len(records) - 1) and joined[-1] == big
    assert assembler.latest("run_big") == big and assembler.incomplete() == []


def test_every_key_is_the_run_ids_own_and_no_other_runs():
    assert is_packet_key(b"run_big", "run_big") and is_packet_key(b"run_big#3", "run_big")
    assert not is_packet_key(b"run_bigger", "run_big")
    assert not is_packet_key(b"run_big#x", "run_big") and not is_packet_key(None, "run_big")


def test_what_compaction_leaves_reads_as_the_latest_packet():
    first, second = packet(BIG, 0), packet(BIG, 1)
    one, two = packet_records(first), packet_records(second)
    # Before compaction: both writes whole, in offset order.
    assert feed_all(one + two).latest("run_big") == second
    # After it: the second write, each of its keys the last; same count, nothing else left.
    assert feed_all(two).latest("run_big") == second
    # A revision that shrank to one record: the earlier write's pieces 1.. stay, headless.
    small = packet("now small", 2)
    left = feed_all(one[1:] + packet_records(small))
    assert left.latest("run_big") == small
    assert [(r, n, c) for r, _d, n, c in left.incomplete()] == [("run_big", len(one) - 1,
                                                                   len(one))]
    # The same before compaction: the big one completes, the later head wins.
    assert feed_all(one + packet_records(small)).latest("run_big") == small


def test_a_head_without_all_its_pieces_is_no_packet_and_other_runs_do_not_mix():
    big = packet(BIG)
    records = packet_records(big)
    assert feed_all(records[:-1]).latest("run_big") is None
    other = packet(BIG, run_id="run_other")
    mixed = [r for pair in zip(records, packet_records(other), strict=True) for r in pair]
    assembler = feed_all(mixed)
    assert assembler.latest("run_big") == big and assembler.latest("run_other") == other


def test_pieces_that_do_not_join_to_their_packet_are_an_error():
    records = packet_records(packet(BIG))
    last = decode_piece(records[-1][1])
    forged = encode_piece(replace(last, data=last.data[:-1] + b"!"))
    assembler = feed_all(records[:-1])
    with pytest.raises(SchemaError, match="do not join"):
        assembler.feed(forged)
    with pytest.raises(SchemaError, match="not a RunInputPiece"):
        decode_piece(encode(packet("x")))


def test_official_avro_reads_a_piece_and_its_fingerprint_is_official_avros():
    _key, value = packet_records(packet(BIG))[1]
    assert value[2:10] == official_fingerprint(PIECE_SCHEMA_PATH)
    schema = avro.schema.parse(PIECE_SCHEMA_PATH.read_text())
    record = avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(io.BytesIO(value[10:])))
    piece = decode_piece(value)
    assert record == {"run_id": "run_big", "tenant": "acme", "packet": piece.packet,
                      "index": 1, "count": piece.count, "data": piece.data,
                      "redaction_name": "default", "redaction_fingerprint": "f" * 64}
