"""The projected reader gives what the compiled reader gives for the fields it is asked for,
walks (and so checks) the fields it skips, and refuses what is cut, corrupt or followed by bytes.

Records are drawn from the shipped schemas as in test_avro_reader.py (every field, every union
branch, maps and arrays), written by fastavro's writer.
"""

from __future__ import annotations

import contextlib
import dataclasses

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelevents.adapters.registry import normalize_file
from modelevents.consumers.audit.verify import EVENT_FIELDS
from modelevents.schemas import codec
from modelevents.schemas.avro_projection import (
    BRANCH,
    MEMO_SIZE,
    compile_projection,
    named_records,
)
from modelevents.schemas.errors import CorruptRecord, SchemaError
from tests.integration.pipeline import ONE_PER_API
from tests.schemas.sample_records import model_event
from tests.schemas.test_avro_reader import LIMITS, NAMED, NAMES, READERS, SCHEMAS, drawn_record

EVENT = f"{codec.NAMESPACE}.ModelEvent"


def _every_other_field(name: str) -> dict:
    """A projection of every second top-level field (the others skipped), strings as lengths."""
    wanted: dict = {}
    for i, f in enumerate(SCHEMAS.current[name]["fields"]):
        if i % 2 == 0:
            wanted[f["name"]] = True
    return wanted


ALL = {name: compile_projection(SCHEMAS.current[name], NAMED,
                                {f["name"]: True for f in SCHEMAS.current[name]["fields"]})
       for name in NAMES}
HALF = {name: compile_projection(SCHEMAS.current[name], NAMED, _every_other_field(name))
        for name in NAMES}
NONE = {name: compile_projection(SCHEMAS.current[name], NAMED, {}) for name in NAMES}


def _memo_or_true(name: str) -> dict:
    """Every field: its scalars (strings, numbers, booleans, unions of null and one) memoized."""
    def scalar(t) -> bool:
        return all(b in ("null", "string", "int", "long", "boolean", "double")
                   for b in (t if isinstance(t, list) else [t]))
    return {f["name"]: "memo" if scalar(f["type"]) else True
            for f in SCHEMAS.current[name]["fields"]}


MEMO = {name: compile_projection(SCHEMAS.current[name], NAMED, _memo_or_true(name))
        for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
@LIMITS
@given(data=st.data())
def test_wanted_fields_are_what_the_compiled_reader_reads(name, data):
    _, body = drawn_record(name, data)
    full = READERS[name](body, 0)
    fields = [f["name"] for f in SCHEMAS.current[name]["fields"]]
    assert ALL[name](body, 0) == tuple(full[f] for f in fields)
    assert HALF[name](body, 0) == tuple(full[f] for f in _every_other_field(name))
    assert NONE[name](body, 0) == ()
    # Memoized groups: read the first time, looked up the next, the same values either way.
    assert MEMO[name](body, 0) == MEMO[name](body, 0) == ALL[name](body, 0)
    # After a header, and followed by other records when asked to say where it ended.
    tail = compile_projection(SCHEMAS.current[name], NAMED, {fields[0]: True}, to_end=False)
    assert tail(b"\xc3\x01" + bytes(8) + body + body, 10) == (full[fields[0]], 10 + len(body))


@pytest.mark.parametrize("name", NAMES)
@LIMITS
@given(data=st.data())
def test_a_cut_or_padded_record_is_corrupt_even_where_nothing_is_read(name, data):
    _, body = drawn_record(name, data)
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(CorruptRecord):
        NONE[name](body[:cut], 0)
    with pytest.raises(CorruptRecord, match="bytes after the record"):
        NONE[name](body + b"\x00", 0)


@pytest.mark.parametrize("name", NAMES)
@LIMITS
@given(data=st.data())
def test_flipped_bytes_skip_as_the_full_reader_reads_or_are_corrupt(name, data):
    body = bytearray(drawn_record(name, data)[1])
    body[data.draw(st.integers(0, len(body) - 1))] ^= data.draw(st.integers(1, 255))
    flipped = bytes(body)
    with contextlib.suppress(CorruptRecord):
        full = READERS[name](flipped, 0)
        assert HALF[name](flipped, 0) == tuple(full[f] for f in _every_other_field(name))
        return
    # The skipped strings are not UTF-8-decoded: only a broken structure is refused there.
    with contextlib.suppress(CorruptRecord):
        HALF[name](flipped, 0)


def test_verify_projection_of_real_events():
    schema = SCHEMAS.current[EVENT]
    read = compile_projection(schema, named_records(schema), EVENT_FIELDS)
    seen_kinds = set()
    for path in ONE_PER_API:
        for event in normalize_file(path).events:
            value = codec.encode(event)
            (run_id, tenant, kind, seq, frame_id, transport, body_len, payload,
             piece) = read(value, 10)
            assert (run_id, tenant, kind, seq, frame_id, transport, body_len) == (
                event.run_id, event.tenant, event.kind, event.seq, event.source.frame_id,
                event.source.transport, len(event.envelope.body))
            name, record = payload
            assert name.rsplit(".", 1)[-1] == type(event.payload).__name__
            if kind == "run.started":
                assert record["provider_object_id"] == event.payload.provider_object_id
            elif name.endswith((".ToolCall", ".ToolResult")):  # the receipts check reads them
                assert record["tool_call_id"] == event.payload.tool_call_id
            else:
                assert record is None
            assert piece is None
            seen_kinds.add(kind)
    assert "run.started" in seen_kinds and len(seen_kinds) > 3


def test_a_wrong_projection_is_refused_when_compiled():
    schema = SCHEMAS.current[EVENT]
    for wanted, message in (({"nope": True}, "no field"),
                            ({"seq": "length"}, "a length is of a string or bytes"),
                            ({"seq": {"x": True}}, "nested projection is of a record"),
                            ({"model": {BRANCH: {}}}, "union of records"),
                            ({"seq": 3}, "not a projection")):
        with pytest.raises(SchemaError, match=message):
            compile_projection(schema, named_records(schema), wanted)


def test_a_memo_of_what_is_not_a_scalar_is_refused_and_a_full_memo_starts_again():
    schema = SCHEMAS.current[EVENT]
    with pytest.raises(SchemaError, match="a memo is of a string"):
        compile_projection(schema, NAMED, {"source": "memo"})
    read = compile_projection(schema, NAMED, {"tenant": "memo", "seq": True})
    events = [codec.encode(dataclasses.replace(model_event("usage", seq=i), tenant=f"t{i}"))
              for i in range(MEMO_SIZE + 10)]
    assert [read(e, 10) for e in events] == [(f"t{i}", i) for i in range(MEMO_SIZE + 10)]


def test_blocks_with_a_byte_size_are_jumped_over():
    """A writer may give a map or array block a negative count and its size in bytes."""
    schema = fastavro.parse_schema({"type": "record", "name": "T", "fields": [
        {"name": "xs", "type": {"type": "array", "items": "long"}},
        {"name": "after", "type": "string"}]})
    read = compile_projection(schema, {}, {"after": True})
    # count -2 (zig-zag 3), size 2 bytes (zig-zag 4), items 1 and 2, end block 0, then "ok".
    assert read(bytes([3, 4, 2, 4, 0, 4]) + b"ok", 0) == ("ok",)
    with pytest.raises(CorruptRecord, match="block size"):
        read(bytes([3, 40, 2, 4, 0, 4]) + b"ok", 0)
