"""Archives without a broker: the container file, byte-identical round trips, clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.consumers.replay import archive
from modelevents.schemas import codec
from modelevents.schemas.errors import InputError, SchemaError
from modelevents.schemas.run_state import RunState
from modelevents.services.cli.commands.replay import parse_time
from modelevents.services.local.feeder import frames_for_file
from tests.paths import FIXTURES, SCHEMA_SAMPLES

SAMPLES = SCHEMA_SAMPLES


def corpus_values() -> list[bytes]:
    """Kafka values of every project fixture: its events and its frames, interleaved by run."""
    values = []
    for path in sorted(p for p in FIXTURES.glob("*/*") if p.is_file()):
        run_id = f"run-{path.stem}"
        events = normalize_bytes(path.read_bytes(), run_id=run_id).events
        frames = frames_for_file(path, run_id=run_id, received_at=1).frames
        values += [codec.encode(obj) for obj in [*events, *frames]]
    return values


def test_every_event_and_frame_round_trips_byte_identical(tmp_path: Path) -> None:
    values = corpus_values()
    out = tmp_path / "all.avro"
    with archive.ArchiveWriter(out, with_frames=True, selection={"all": True}) as writer:
        for value in values:
            writer.write_value(value)
    back = [archive.value_of(name, record) for name, record in archive.read_archive(out)]
    assert back == values
    info = archive.read_header(out)
    assert (info.contents, info.selection, info.codec) == (
        "events+frames", {"all": True}, "deflate")


def test_released_samples_round_trip(tmp_path: Path) -> None:
    samples = sorted([*SAMPLES.glob("v*/model_event.*.bin"),
                      *SAMPLES.glob("v*/provider_frame*.bin")])
    assert samples
    for sample in samples:
        value = sample.read_bytes()
        name, record = archive.record_of(value)
        assert codec.decode(archive.value_of(name, record)) == codec.decode(value), sample.name


def test_an_events_file_is_the_model_event_schema_verbatim(tmp_path: Path) -> None:
    run = normalize_bytes((FIXTURES / "openai-chat" / "refusal.sse").read_bytes(), run_id="r")
    out = tmp_path / "events.avro"
    with archive.ArchiveWriter(out) as writer:
        for event in run.events:
            writer.write_value(codec.encode(event))
    with out.open("rb") as fo:
        reader = fastavro.reader(fo)
        header_schema = json.loads(reader.metadata["avro.schema"])
        records = list(reader)
    assert header_schema == json.loads((codec.AVRO_DIR / "model_event.avsc").read_text())
    assert [r["kind"] for r in records] == [e.kind for e in run.events]
    assert records[0]["run_id"] == "r" and records[-1]["seq"] == len(run.events) - 1


def test_an_events_file_refuses_frames(tmp_path: Path) -> None:
    frame = frames_for_file(FIXTURES / "openai-chat" / "refusal.sse", run_id="r").frames[0]
    with pytest.raises(archive.ArchiveError, match="events only"):
        with archive.ArchiveWriter(tmp_path / "e.avro") as writer:
            writer.write_value(codec.encode(frame))
    assert not list(tmp_path.iterdir())  # the failed write left nothing behind


def test_a_failed_export_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "x.avro"
    out.write_bytes(b"the previous export")
    with pytest.raises(RuntimeError):
        with archive.ArchiveWriter(out) as writer:
            writer.write_value(codec.encode(normalize_bytes(
                (FIXTURES / "openai-chat" / "refusal.sse").read_bytes(), run_id="r").events[0]))
            raise RuntimeError("interrupted")
    assert out.read_bytes() == b"the previous export"
    assert [p.name for p in tmp_path.iterdir()] == ["x.avro"]


def test_records_that_cannot_be_archived_or_imported_are_refused() -> None:
    with pytest.raises(SchemaError, match="not an Avro single-object record"):
        archive.record_of(b"{}")
    with pytest.raises(SchemaError, match="events and frames only"):
        archive.record_of(codec.encode(RunState(run_id="r", tenant="t")))
    event = normalize_bytes((FIXTURES / "openai-chat" / "refusal.sse").read_bytes(),
                            run_id="r").events[0]
    name, record = archive.record_of(codec.encode(event))
    record["kind"] = "text.delta"  # a run.started payload under another kind
    with pytest.raises(SchemaError, match="carries a RunStarted payload"):
        archive.value_of(name, record)
    del record["event_id"]
    with pytest.raises(SchemaError, match="does not fit the modelevents.ModelEvent schema"):
        archive.value_of(name, record)


def test_unreadable_files_say_what_they_are(tmp_path: Path) -> None:
    text = tmp_path / "notes.avro"
    text.write_text("hello")
    with pytest.raises(archive.ArchiveError, match="not an Avro object container file"):
        archive.read_header(text)
    with pytest.raises(archive.ArchiveError, match="cannot read"):
        archive.read_header(tmp_path / "absent.avro")
    other = tmp_path / "other.avro"
    with other.open("wb") as fo:
        fastavro.writer(fo, {"type": "record", "name": "Other", "fields": [
            {"name": "x", "type": "int"}]}, [{"x": 1}])
    with pytest.raises(archive.ArchiveError, match="holds Other records"):
        list(archive.read_archive(other))
    assert issubclass(archive.ArchiveError, InputError)  # the CLI's exit 2 with the message


def test_parse_time() -> None:
    assert parse_time("2026-11-30T10:00:00Z", "--from-time") == 1796032800000
    assert parse_time("2026-11-30T11:00:00+01:00", "--from-time") == 1796032800000
    assert parse_time("2026-11-30T10:00:00", "--from-time") == 1796032800000  # UTC
    assert parse_time("2026-11-30", "--from-time") == 1795996800000
    assert parse_time("1796032800000", "--from-time") == 1796032800000
    with pytest.raises(InputError, match="--to-time 'soon' is not a time"):
        parse_time("soon", "--to-time")


def test_an_archive_of_an_earlier_schema_version_is_read_by_resolution(tmp_path: Path) -> None:
    """An archive outlives releases: one written before a field was added still imports."""
    events = normalize_bytes((FIXTURES / "openai-chat" / "refusal.sse").read_bytes(),
                             run_id="r").events
    older = json.loads((codec.AVRO_DIR / "model_event.avsc").read_text())
    older["fields"] = [f for f in older["fields"] if f["name"] != "model"]  # "added later"
    records = []
    for event in events:
        _, record = archive.record_of(codec.encode(event))
        del record["model"]
        records.append(record)
    out = tmp_path / "old.avro"
    with out.open("wb") as fo:
        fastavro.writer(fo, older, records, codec="deflate")
    assert not archive.read_header(out).current_schema
    back = [codec.decode(archive.value_of(n, r)) for n, r in archive.read_archive(out)]
    assert [e.event_id for e in back] == [e.event_id for e in events]
    assert all(e.model is None for e in back)  # the reader's default
