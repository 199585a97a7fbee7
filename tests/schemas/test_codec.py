"""The Avro codec: single-object encoding, round trips, schema resolution, clear errors."""

from __future__ import annotations

import json
import shutil
from dataclasses import fields

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.schemas import codec
from modelevents.schemas import events as ev
from modelevents.schemas.errors import SchemaError, UnknownSchemaError
from tests.paths import SCHEMA_SAMPLES
from tests.schemas.sample_records import PAYLOADS, PIECE_KIND, model_event, other_records

SAMPLES = SCHEMA_SAMPLES


def test_every_kind_has_a_sample():
    assert set(PAYLOADS) == ev.KINDS


@pytest.mark.parametrize("kind", sorted(ev.KINDS))
def test_every_kind_round_trips_unchanged(kind):
    event = model_event(kind, seq=3)
    data = codec.encode(event)
    assert data[:2] == b"\xc3\x01"
    assert codec.decode(data) == event


@pytest.mark.parametrize("name", ["provider_frame", "run_state", "dead_letter"])
def test_other_records_round_trip(name):
    record = other_records()[name]
    assert codec.decode(codec.encode(record)) == record


def test_fingerprint_is_crc64_avro_of_canonical_form():
    # Avro specification's own example: the schema "int" has fingerprint 0x7275d51a3f395c8f,
    # written little-endian after the magic.
    assert codec.fingerprint_of(fastavro.parse_schema("int")) == bytes.fromhex("8f5c393f1ad57572")
    data = codec.encode(model_event("text.delta"))
    assert data[2:10] == codec.schemas().current_fingerprint["modelevents.ModelEvent"]


def test_python_types_mirror_the_avro_payload_records():
    avsc = json.loads((codec.AVRO_DIR / "model_event.avsc").read_text())
    union = next(f for f in avsc["fields"] if f["name"] == "payload")["type"]
    avro_fields = {rec["name"]: {f["name"] for f in rec["fields"]} for rec in union}
    py_fields = {name: {f.name for f in fields(cls)} for name, cls in ev.PAYLOAD_TYPES.items()}
    assert avro_fields == py_fields


def test_garbage_is_a_clear_error():
    with pytest.raises(SchemaError, match="magic C3 01"):
        codec.decode(b"{not avro}")
    with pytest.raises(SchemaError, match="magic"):
        codec.decode(b"")


def test_unknown_fingerprint_says_to_upgrade():
    data = codec.encode(model_event("text.delta"))
    with pytest.raises(UnknownSchemaError, match="upgrade"):
        codec.decode(data[:2] + b"\x00" * 8 + data[10:])


def test_truncated_body_is_a_clear_error():
    data = codec.encode(model_event("text.done"))
    with pytest.raises(SchemaError, match="corrupt modelevents.ModelEvent"):
        codec.decode(data[:-7])


def test_kind_and_payload_must_agree():
    event = model_event("text.delta")
    event.payload = PAYLOADS["usage"]
    with pytest.raises(SchemaError, match="carries a Usage payload"):
        codec.decode(codec.encode(event))


@pytest.mark.parametrize("kind", sorted(ev.KINDS))
def test_compiled_writer_is_byte_identical_to_fastavro(kind):
    event = model_event(kind, seq=9)
    assert codec.encode(event) == codec.encode_with_fastavro(event)
    for record in other_records().values():
        assert codec.encode(record) == codec.encode_with_fastavro(record)


def test_unencodable_value_names_the_record():
    event = model_event("text.delta")
    event.payload = ev.Text(output_index="zero", part_index=0, text="x")  # type: ignore[arg-type]
    with pytest.raises(SchemaError, match="ModelEvent does not fit"):
        codec.encode(event)


# --- schema evolution --------------------------------------------------------------------------


@pytest.mark.parametrize("sample", sorted(SAMPLES.glob("*/*.bin")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_frozen_samples_of_released_versions_stay_decodable(sample):
    """Every sample encoded by a released version decodes with today's reader schema."""
    record = codec.decode(sample.read_bytes())
    expected = json.loads(sample.with_suffix(".json").read_text())
    assert type(record).__name__ == expected["type"]
    if isinstance(record, ev.ModelEvent):
        assert record.kind == expected["kind"]
        assert record.event_id == expected["event_id"]


def test_samples_exist_for_the_current_release():
    # v4 added the kind policy.violation: earlier versions have one sample fewer.
    for version in ("v1", "v2", "v3"):
        assert len(list(SAMPLES.glob(f"{version}/*.bin"))) == len(ev.KINDS) - 1 + 3, version
    assert len(list(SAMPLES.glob("v4/*.bin"))) == len(ev.KINDS) + 3
    # v2's new fields are in its samples: a piece of an event and of a frame, timestamps.
    piece = codec.decode((SAMPLES / "v2" / f"model_event.{PIECE_KIND}.bin").read_bytes())
    assert piece.piece == ev.Piece(index=0, count=2)
    frame = codec.decode((SAMPLES / "v2" / "provider_frame.bin").read_bytes())
    assert frame.piece is not None and frame.piece.count == 3
    state = codec.decode((SAMPLES / "v2" / "run_state.bin").read_bytes())
    assert state.started_at == 1_764_460_800_000 and type(state.started_at) is int
    # v3's new field is in its samples: Usage.iterations; a v2 usage reads with none.
    usage = codec.decode((SAMPLES / "v3" / "model_event.usage.bin").read_bytes()).payload
    assert usage.iterations is not None and usage.iterations.startswith('[{"type":"compaction"')
    assert codec.decode((SAMPLES / "v2" / "model_event.usage.bin").read_bytes()
                        ).payload.iterations is None
    # v4's new fields and kind are in its samples; a v3 citation, hosted result and run state
    # read as judged by no policy.
    v4 = {name: codec.decode((SAMPLES / "v4" / f"{name}.bin").read_bytes())
          for name in ("model_event.citation", "model_event.hosted.result",
                       "model_event.policy.violation", "run_state")}
    assert v4["model_event.citation"].payload.trust == "trusted"
    assert v4["model_event.hosted.result"].payload.source_trust == {
        "https://example.com": "untrusted"}
    assert v4["model_event.policy.violation"].payload == ev.PolicyViolation(
        violation="blocked_source", note="web_search evidence from a blocked source",
        call_id="ws_1", source="https://evil.example/x")
    assert (v4["run_state"].untrusted_sources, v4["run_state"].blocked_sources) == (2, 1)
    v3 = {name: codec.decode((SAMPLES / "v3" / f"{name}.bin").read_bytes())
          for name in ("model_event.citation", "model_event.hosted.result", "run_state")}
    assert v3["model_event.citation"].payload.trust == "unknown"
    hosted = v3["model_event.hosted.result"].payload
    assert (hosted.trust, hosted.source_trust) == ("unknown", {})
    assert (v3["run_state"].untrusted_sources, v3["run_state"].blocked_sources,
            v3["run_state"].policy_violations) == (0, 0, 0)
    # v5's new field is in its run.started sample; a v4 run.started reads as under no bundle.
    started = codec.decode((SAMPLES / "v5" / "model_event.run.started.bin").read_bytes())
    assert started.payload == ev.RunStarted("in_progress", "resp_1", "bnd-" + "5e" * 32)
    assert codec.decode((SAMPLES / "v4" / "model_event.run.started.bin").read_bytes()
                        ).payload == ev.RunStarted("in_progress", "resp_1", None)


def test_v5_samples_carry_the_current_fingerprints():
    current = set(codec.schemas().current_fingerprint.values())
    assert {p.read_bytes()[2:10] for p in SAMPLES.glob("v5/*.bin")} == current


def test_timestamps_stay_ints_when_fastavro_resolves_an_older_writer(tmp_path, monkeypatch):
    """When today's schemas are history (the next release), their records go through fastavro's
    resolution, which would turn timestamp-millis into datetimes: the codec gives ints still."""
    new_dir = tmp_path / "avro"
    shutil.copytree(codec.AVRO_DIR, new_dir)
    for name in codec.CURRENT_FILES:
        shutil.copy(codec.AVRO_DIR / name, new_dir / "history" / name.replace(".avsc", ".v5.avsc"))
        schema = json.loads((new_dir / name).read_text())
        # A change the Python types do not see but resolution must handle: the field order.
        schema["fields"][:2] = schema["fields"][1::-1]
        (new_dir / name).write_text(json.dumps(schema))
    records = [model_event(kind, seq=1) for kind in sorted(PAYLOADS)] + list(
        other_records().values())
    written = [codec.encode(record) for record in records]
    newer = codec.SchemaSet(new_dir)
    assert not set(newer.readers) & {data[2:10] for data in written}  # fastavro's path
    monkeypatch.setattr(codec, "schemas", lambda: newer)
    for record, data in zip(records, written):
        decoded = codec.decode(data)
        assert decoded == record
        for field in newer.timestamp_fields[f"modelevents.{type(record).__name__}"]:
            assert type(getattr(decoded, field)) in (int, type(None)), field


def test_a_newer_reader_resolves_records_of_the_old_writer(tmp_path):
    """Evolve ModelEvent the way a release would (new payload field with a default, old schema
    archived in history/) and read a record written before the change."""
    old_bytes = codec.encode(model_event("text.done"))
    new_dir = tmp_path / "avro"
    shutil.copytree(codec.AVRO_DIR, new_dir)
    (new_dir / "history").mkdir(exist_ok=True)
    shutil.copy(codec.AVRO_DIR / "model_event.avsc", new_dir / "history" / "model_event.v1.avsc")
    schema = json.loads((new_dir / "model_event.avsc").read_text())
    text = next(r for r in next(f for f in schema["fields"] if f["name"] == "payload")["type"]
                if r["name"] == "Text")
    text["fields"].append({"name": "annotations_count", "type": "int", "default": 0})
    (new_dir / "model_event.avsc").write_text(json.dumps(schema))
    newer = codec.SchemaSet(new_dir)
    fp = old_bytes[2:10]
    assert fp in newer.writers and fp != newer.current_fingerprint["modelevents.ModelEvent"]
    name, writer = newer.writers[fp]
    import io
    record = fastavro.schemaless_reader(io.BytesIO(old_bytes[10:]), writer, newer.current[name],
                                        return_record_name=True,
                                        return_record_name_override=True)
    assert record["payload"][1]["annotations_count"] == 0
    assert record["payload"][1]["text"] == PAYLOADS["text.done"].text


# --- property: any event round-trips ------------------------------------------------------------

texts = st.text(max_size=200)
opt_texts = st.none() | texts
ints = st.integers(min_value=0, max_value=2**31 - 1)


@settings(max_examples=200, deadline=None)
@given(run_id=texts, text=texts, item_id=opt_texts, out=ints, part=ints, seq=st.integers(-1, 2**62),
       body=st.binary(max_size=300), cursor=opt_texts, model=opt_texts)
def test_text_events_round_trip(run_id, text, item_id, out, part, seq, body, cursor, model):
    event = model_event("text.delta", seq=seq)
    event.run_id, event.model = run_id, model
    event.source.cursor = cursor
    event.envelope.body = body
    event.payload = ev.Text(output_index=out, part_index=part, text=text, item_id=item_id)
    data = codec.encode(event)
    assert data == codec.encode_with_fastavro(event)
    assert codec.decode(data) == event


@settings(max_examples=200, deadline=None)
@given(name=texts, call_id=texts, args=texts, valid=st.none() | st.booleans(),
       units=st.dictionaries(texts, st.integers(0, 2**40), max_size=4),
       tokens=st.none() | st.integers(0, 2**40))
def test_tool_and_usage_events_round_trip(name, call_id, args, valid, units, tokens):
    call = model_event("tool.call")
    call.payload = ev.ToolCall(output_index=0, tool_name=name, tool_call_id=call_id,
                               arguments=args, arguments_valid=valid)
    usage = model_event("usage")
    usage.payload = ev.Usage(input_tokens=tokens, total_tokens=tokens, server_tool_units=units)
    for event in (call, usage):
        data = codec.encode(event)
        assert data == codec.encode_with_fastavro(event)
        assert codec.decode(data) == event


def test_memoized_field_groups_of_different_records_never_share_an_encoding():
    """Found by pieces (an event's later pieces carry empty small fields): Message's (item_id,
    role, phase) and RunFinished's (status, reason, raw_reason) are both memoized groups, and
    ("", "", "") encodes differently in each; keyed by values alone, the first one written was
    reused for the other and the record decoded as garbage."""
    from modelevents.schemas.events import Envelope, EventSource, Message, ModelEvent, RunFinished

    def event(kind, payload):
        return ModelEvent("id", "r", "t", "p", "a", None, kind, EventSource("f", 0, "sse"), 1,
                          "x@1", Envelope("c", b""), payload)

    message = event("message.started", Message(0, "", item_id="", phase=""))
    finished = event("run.finished", RunFinished("", "", ""))
    for record in (message, finished, message):
        assert codec.decode(codec.encode(record)) == record
        assert codec.encode(record) == codec.encode_with_fastavro(record)


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_typed_event_reader_builds_what_the_record_path_builds(kind):
    """decode builds current-schema ModelEvents straight from the bytes (issue #17): the same
    event, field for field, as the dict reader + constructor path, memoryviews included."""
    from modelevents.schemas.codec import _from_record
    data = codec.encode(model_event(kind))
    name, read = codec.schemas().readers[data[2:10]]
    assert data[2:10] in codec.schemas().event_readers
    assert codec.decode(data) == _from_record(name, read(data, 10))
    assert codec.decode(memoryview(data)) == codec.decode(data)
