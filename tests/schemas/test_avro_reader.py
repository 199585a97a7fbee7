"""The compiled reader reads what fastavro reads, and refuses what is cut or corrupt.

Records are generated from the shipped schemas themselves (every field, every union branch),
written by fastavro's writer, and read by both readers.
"""

from __future__ import annotations

import io

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelevents.schemas import codec
from modelevents.schemas.avro_reader import compile_reader
from modelevents.schemas.errors import CorruptRecord, SchemaError

SCHEMAS = codec.schemas()
NAMES = sorted(SCHEMAS.current)
NAMED = {}
for _schema in SCHEMAS.current.values():
    fastavro.parse_schema(_schema, NAMED)


def _record_named(name: str) -> dict:
    return SCHEMAS.current.get(name) or NAMED[name]


def values_of(schema, depth: int = 0):
    """A strategy for values of an Avro schema, in the form fastavro's writer takes."""
    if isinstance(schema, list):
        branches = []
        for branch in schema:
            inner = values_of(branch, depth + 1)
            resolved = _record_named(branch) if isinstance(branch, str) and branch in NAMED else branch
            if isinstance(resolved, dict) and resolved.get("type") == "record" and len(schema) > 2:
                # A union of records: name the branch, as the codec's writer does.
                inner = inner.map(lambda record, n=resolved["name"]: (n, record))
            branches.append(inner)
        return st.one_of(branches)
    kind = schema["type"] if isinstance(schema, dict) else schema
    if isinstance(kind, str) and kind in NAMED:
        return values_of(NAMED[kind], depth)
    if kind == "record":
        return st.fixed_dictionaries({f["name"]: values_of(f["type"], depth + 1)
                                      for f in schema["fields"]})
    return {
        "null": st.none(),
        "boolean": st.booleans(),
        "int": st.integers(-(2**31), 2**31 - 1),
        "long": st.integers(-(2**63), 2**63 - 1),
        "double": st.floats(allow_nan=False),
        "string": st.text(max_size=40),
        "bytes": st.binary(max_size=300),
        "map": st.dictionaries(st.text(max_size=10), values_of(schema.get("values"), depth + 1)
                               if isinstance(schema, dict) and "values" in schema else st.none(),
                               max_size=3),
        "array": st.lists(values_of(schema.get("items"), depth + 1)
                          if isinstance(schema, dict) and "items" in schema else st.none(),
                          max_size=3),
    }[kind]


def fastavro_read(schema: dict, body: bytes):
    return fastavro.schemaless_reader(io.BytesIO(body), schema, None, return_record_name=True,
                                      return_record_name_override=True)


def written(schema: dict, record) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, record)
    return buf.getvalue()


READERS = {name: compile_reader(SCHEMAS.current[name], NAMED) for name in NAMES}
LIMITS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def drawn_record(name: str, data) -> tuple[dict, bytes]:
    """(the schema fastavro reads it with, the body fastavro writes for a record drawn from the
    current schema). fastavro reads with the schema less its logical types, as the codec has it
    do: timestamps stay ints, as the compiled reader gives them (the binary form is the same)."""
    schema = SCHEMAS.current[name]
    return SCHEMAS.plain[name], written(schema, data.draw(values_of(schema)))


@pytest.mark.parametrize("name", NAMES)
@LIMITS
@given(data=st.data())
def test_reads_what_fastavro_reads(name, data):
    schema, body = drawn_record(name, data)
    # At an offset, as the codec reads behind the single-object header.
    assert READERS[name](b"\xc3\x01" + bytes(8) + body, 10) == fastavro_read(schema, body)


@pytest.mark.parametrize("name", NAMES)
@LIMITS
@given(data=st.data())
def test_a_cut_record_is_corrupt_never_a_shorter_value(name, data):
    _, body = drawn_record(name, data)
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(CorruptRecord):
        READERS[name](body[:cut], 0)


@pytest.mark.parametrize("name", NAMES)
@LIMITS
@given(data=st.data())
def test_flipped_bytes_read_as_fastavro_reads_them_or_are_corrupt(name, data):
    schema, written_body = drawn_record(name, data)
    body = bytearray(written_body)
    at = data.draw(st.integers(0, len(body) - 1))
    body[at] ^= data.draw(st.integers(1, 255))
    try:
        ours = READERS[name](bytes(body), 0)
    except CorruptRecord:
        return  # fastavro may still read such bytes (it does not check every length); we refuse
    assert ours == fastavro_read(schema, bytes(body))


def test_the_codec_reads_current_records_with_the_compiled_reader_and_says_what_is_corrupt():
    frame_schema = SCHEMAS.current[f"{codec.NAMESPACE}.ProviderFrame"]
    fp = SCHEMAS.current_fingerprint[f"{codec.NAMESPACE}.ProviderFrame"]
    assert SCHEMAS.readers[fp][0] == frame_schema["name"]
    record = {"frame_id": "f", "run_key": "r", "tenant": "t", "provider": "openai",
              "api": "openai-responses", "transport": "sse", "stream_id": None, "index": 3,
              "received_at": 1, "content_type": "text/event-stream", "sse_event": None,
              "cursor": "c", "headers": {"x-request-id": "q"}, "http_status": 200,
              "body": b"{}"}
    data = codec.MAGIC + fp + written(frame_schema, record)
    assert codec.decode(data).cursor == "c"
    assert codec.decode(memoryview(data)).headers == {"x-request-id": "q"}
    with pytest.raises(SchemaError, match="corrupt modelevents.ProviderFrame record"):
        codec.decode(data[:-3])


def test_types_outside_the_subset_are_refused_at_compile_time():
    schema = fastavro.parse_schema({"type": "record", "name": "T", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}]})
    with pytest.raises(SchemaError, match="does not support Avro type 'enum'"):
        compile_reader(schema, {})


def test_a_boolean_byte_other_than_0_or_1_is_corrupt():
    # Found by the flipped-bytes property: fastavro reads any non-zero byte as true.
    schema = fastavro.parse_schema({"type": "record", "name": "B", "fields": [
        {"name": "flag", "type": "boolean"}, {"name": "n", "type": "long"}]})
    read = compile_reader(schema, {})
    assert read(b"\x01\x04", 0) == {"flag": True, "n": 2}
    assert read(b"\x00\x04", 0) == {"flag": False, "n": 2}
    with pytest.raises(CorruptRecord, match="neither 0 nor 1"):
        read(b"\x03\x04", 0)


def test_a_varint_beyond_64_bits_is_corrupt():
    # Found by the flipped-bytes property: a tenth varint byte above 1 carries bits past a long,
    # which fastavro wraps into another number.
    schema = fastavro.parse_schema({"type": "record", "name": "L", "fields": [
        {"name": "n", "type": "long"}]})
    read = compile_reader(schema, {})
    largest = b"\xfe" + b"\xff" * 8 + b"\x01"  # zigzag 2**64 - 2: the largest long
    assert read(largest, 0) == {"n": 2**63 - 1} == fastavro_read(schema, largest)
    assert read(b"\xff" * 9 + b"\x01", 0) == {"n": -2**63}
    with pytest.raises(CorruptRecord, match="beyond 64 bits"):
        read(b"\xff" * 9 + b"\x02", 0)
