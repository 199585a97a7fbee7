"""`modelevents replay` against a real broker: state rebuild, adapter parity, export and import.

The processor is not needed: the tests publish realistic logs themselves — frames cut from the
project's fixtures as the feeder cuts them, events as `normalize` gives them for the same file
(same event ids), run states folded by the run machine — and then tamper with them the way a
bug would. Each test has its own topic prefix on this module's own broker (base port 19800).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import fastavro
import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from modelevents.adapters.openai_chat import OpenAIChatAdapter
from modelevents.adapters.registry import ADAPTERS, normalize_bytes
from modelevents.consumers.replay import archive, checks, export
from modelevents.consumers.replay.topic_snapshot import RawRecord, Start, format_ms, read_snapshot
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.cli import main as cli_main
from modelevents.services.kafka.clients import start_producer, topic_name
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import internal_topics
from modelevents.services.local.feeder import frames_for_file
from modelevents.services.run_logic.run_machine import run_state_of
from tests.integration.conftest import broker_fixture
from tests.paths import FIXTURES

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19800, scope="module")

# Fixed, recent log timestamps (past ones older than the topic's retention would be deleted,
# future ones are refused by the broker): three hours ago, on the hour, for readable ranges.
HOUR = 3_600_000
BASE_MS = (int(time.time() * 1000) // HOUR - 3) * HOUR

RUNS = {
    "text": FIXTURES / "openai-responses" / "text-with-usage.sse",
    "tools": FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse",
    "truncated": FIXTURES / "openai-chat" / "truncated.sse",  # ends with a close-time error
    "cassette": FIXTURES / "cassettes" / "anthropic-tool-loop.yaml",  # several model calls
    "gemini": FIXTURES / "gemini-generate" / "grounding-citations.sse",
}


@dataclasses.dataclass
class RecordedRun:
    run_id: str
    frames: list[ProviderFrame]
    events: list[ModelEvent]

    @property
    def state(self):
        return run_state_of(self.events)


def recorded(name: str, path: Path | None = None) -> RecordedRun:
    """A run as the pipeline would have published it: frames as the feeder cuts them (with the
    end-of-input markers), events as `normalize` gives them for the same file (same run id, same
    event ids), seq from 0."""
    path = path or RUNS[name]
    run_id = f"run-{name}"
    feed = frames_for_file(path, run_id=run_id, received_at=BASE_MS)
    events = normalize_bytes(path.read_bytes(), run_id=run_id).events
    # The feeder ends each stream and the run with end-of-input markers, as a gateway does.
    return RecordedRun(run_id, with_end_markers(feed.frames), events)


def produce(settings: PipelineSettings, topic: str,
            records: Iterable[tuple[str, bytes | None]], timestamp_ms: int | None = None) -> None:
    """(key, value) records on a topic through the project's idempotent producer."""

    async def go() -> None:
        producer = await start_producer(settings)
        try:
            futures = [await producer.send(topic_name(settings, topic), key=key.encode(),
                                           value=value, timestamp_ms=timestamp_ms)
                       for key, value in records]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(go())


def publish(settings: PipelineSettings, run: RecordedRun, *, frames: bool = True,
            events: Iterable[ModelEvent] | None = None, state: bool = True,
            timestamp_ms: int | None = None) -> None:
    if frames:
        produce(settings, "frames", [(f.run_key, codec.encode(f)) for f in run.frames],
                timestamp_ms)
    produce(settings, "events",
            [(e.run_id, codec.encode(e)) for e in (run.events if events is None else events)],
            timestamp_ms)
    if state:
        produce(settings, "runs", [(run.run_id, codec.encode(run.state))], timestamp_ms)


def snapshot(settings: PipelineSettings, topic: str, key: str | None = None) -> list[RawRecord]:
    async def go() -> list[RawRecord]:
        return [r async for r in read_snapshot(settings, topic,
                                               key=None if key is None else key.encode())]

    return sorted(asyncio.run(go()), key=lambda r: (r.partition, r.offset))


def cli(settings: PipelineSettings, *args: str) -> int:
    return cli_main(["replay", *args, "--bootstrap-servers", settings.bootstrap_servers,
                     "--prefix", settings.topic_prefix])


def iso(ms: int) -> str:
    return format_ms(ms)


# --- (a) state rebuild --------------------------------------------------------------------------


def test_state_rebuilt_from_events_equals_runs(pipeline_settings: PipelineSettings,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    runs = [recorded(name) for name in RUNS]
    for run in runs:
        publish(pipeline_settings, run, frames=False)
    # At-least-once: a redelivered stretch of a run's events must not change its state.
    again = runs[1].events[3:9]
    produce(pipeline_settings, "events", [(e.run_id, codec.encode(e)) for e in again])

    report = asyncio.run(checks.check_state(pipeline_settings))
    assert report.ok, report
    assert [(c.run_id, c.verdict) for c in report.runs] == sorted(
        (r.run_id, "equal") for r in runs)
    tools = next(c for c in report.runs if c.run_id == runs[1].run_id)
    assert tools.events == len(runs[1].events) + len(again)
    assert tools.rebuilt == runs[1].state and tools.rebuilt.status == "completed"

    assert cli(pipeline_settings, "state", "--show-equal") == 0
    out = capsys.readouterr().out
    assert f"equal    {runs[0].run_id}" in out
    assert f"state: {len(runs)} runs from the beginning" in out and "0 differs" in out


def test_state_detects_a_tampered_runs_record_and_a_missing_one(
        pipeline_settings: PipelineSettings, capsys: pytest.CaptureFixture[str]) -> None:
    good, tampered, lost = recorded("text"), recorded("tools"), recorded("gemini")
    publish(pipeline_settings, good, frames=False)
    publish(pipeline_settings, tampered, frames=False)
    publish(pipeline_settings, lost, frames=False, state=False)
    # A later record of the same run on the compacted topic is what counts: make it lie.
    wrong = dataclasses.replace(tampered.state, status="in_progress", last_seq=3)
    produce(pipeline_settings, "runs", [(tampered.run_id, codec.encode(wrong))])

    report = asyncio.run(checks.check_state(pipeline_settings))
    assert not report.ok
    verdicts = {c.run_id: c for c in report.runs}
    assert verdicts[good.run_id].verdict == "equal"
    assert verdicts[lost.run_id].verdict == "missing"
    differs = verdicts[tampered.run_id]
    assert differs.verdict == "differs"
    assert {d.field: (d.rebuilt, d.published) for d in differs.diffs} == {
        "status": ("completed", "in_progress"),
        "last_seq": (len(tampered.events) - 1, 3),
    }
    # --ignore leaves fields out of the comparison.
    ignoring = asyncio.run(checks.check_state(pipeline_settings, run_id=tampered.run_id,
                                              ignore=["status", "last_seq"]))
    assert [c.verdict for c in ignoring.runs] == ["equal"]

    assert cli(pipeline_settings, "state") == 1
    out = capsys.readouterr().out
    assert f"differs  {tampered.run_id}" in out
    assert "status: rebuilt \"completed\", published \"in_progress\"" in out
    assert f"missing  {lost.run_id}" in out and "no record on" in out
    assert "1 equal, 1 differs, 1 missing" in out

    assert cli(pipeline_settings, "state", "--json", "--run-id", tampered.run_id) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["verdict"] == "differs" and lines[0]["run_id"] == tampered.run_id
    assert {d["field"] for d in lines[0]["diffs"]} == {"status", "last_seq"}
    assert lines[-1]["summary"]["differs"] == 1 and lines[-1]["summary"]["ok"] is False


def test_state_from_an_offset_or_a_time(make_settings: Callable[..., PipelineSettings],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings(partitions=1)  # one partition: offsets are a total order
    first, second = recorded("text"), recorded("tools")
    publish(settings, first, frames=False, timestamp_ms=BASE_MS)
    publish(settings, second, frames=False, timestamp_ms=BASE_MS + HOUR)
    n = len(first.events)

    from_second = asyncio.run(checks.check_state(settings, start=Start.at_offset(n)))
    assert [(c.run_id, c.verdict) for c in from_second.runs] == [(second.run_id, "equal")]

    inside_first = asyncio.run(checks.check_state(settings, start=Start.at_offset(2)))
    verdicts = {c.run_id: c for c in inside_first.runs}
    assert verdicts[first.run_id].verdict == "partial" and verdicts[first.run_id].first_seq == 2
    assert verdicts[second.run_id].verdict == "equal"
    assert inside_first.ok  # a run cut by the range is reported, not failed

    assert cli(settings, "state", "--from-time", iso(BASE_MS + HOUR), "--show-equal") == 0
    out = capsys.readouterr().out
    assert f"equal    {second.run_id}" in out and first.run_id not in out


def test_state_errors_say_what_is_wrong(pipeline_settings: PipelineSettings,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    run = recorded("text")
    publish(pipeline_settings, run, frames=False, timestamp_ms=BASE_MS)
    with pytest.raises(checks.NoSuchRun, match="no run run-nope"):
        asyncio.run(checks.check_state(pipeline_settings, run_id="run-nope"))
    later = Start.at_time(BASE_MS + HOUR)
    with pytest.raises(checks.EmptyRange, match="no events on .*events from "):
        asyncio.run(checks.check_state(pipeline_settings, start=later))
    with pytest.raises(checks.EmptyRange, match=f"run {run.run_id} has no events"):
        asyncio.run(checks.check_state(pipeline_settings, start=later, run_id=run.run_id))

    assert cli(pipeline_settings, "state", "--run-id", "run-nope") == 2
    assert "modelevents: error: no run run-nope" in capsys.readouterr().err
    assert cli(pipeline_settings, "state", "--from-time", "yesterday") == 2
    assert "--from-time 'yesterday' is not a time" in capsys.readouterr().err
    assert cli(pipeline_settings, "state", "--ignore", "colour") == 2
    assert "RunState has no such field" in capsys.readouterr().err
    missing_topics = dataclasses.replace(pipeline_settings, topic_prefix="no-such-prefix.")
    assert cli(missing_topics, "state") == 2
    assert "topic no-such-prefix.events does not exist" in capsys.readouterr().err


# --- (b) adapter parity ------------------------------------------------------------------------


def test_parity_of_every_project_fixture_is_equal(pipeline_settings: PipelineSettings) -> None:
    paths = sorted(p for p in FIXTURES.glob("*/*") if p.is_file())
    runs = [recorded(f"{p.parent.name}-{p.stem}", p) for p in paths]
    for run in runs:
        publish(pipeline_settings, run, state=False)

    report = asyncio.run(checks.check_parity(pipeline_settings))
    not_equal = [(r.run_id, r.verdict, r.first_diff, r.notes) for r in report.runs
                 if r.verdict != "equal"]
    assert not not_equal
    assert len(report.runs) == len(runs) and report.ok
    assert report.frames_read == sum(len(r.frames) for r in runs)
    assert report.events_read == sum(len(r.events) for r in runs)


def test_parity_detects_a_changed_event_a_lagging_run_and_a_run_without_events(
        pipeline_settings: PipelineSettings, capsys: pytest.CaptureFixture[str]) -> None:
    changed, lagging, unpublished, fine = (recorded("text"), recorded("tools"),
                                           recorded("gemini"), recorded("truncated"))
    # What an older adapter published: one text delta said something else.
    position = next(i for i, e in enumerate(changed.events) if e.kind == "text.delta")
    old = changed.events[position]
    bad = dataclasses.replace(old, payload=dataclasses.replace(old.payload, text="Hullo"))
    publish(pipeline_settings, changed,
            events=[*changed.events[:position], bad, *changed.events[position + 1:]])
    publish(pipeline_settings, lagging, events=lagging.events[:5])
    publish(pipeline_settings, unpublished, frames=True, events=[], state=False)
    publish(pipeline_settings, fine)

    report = asyncio.run(checks.check_parity(pipeline_settings))
    by_run = {r.run_id: r for r in report.runs}
    assert by_run[fine.run_id].verdict == "equal"
    assert by_run[unpublished.run_id].verdict == "missing"
    diff = by_run[changed.run_id]
    assert diff.verdict == "differs" and diff.changed == 1
    assert diff.only_expected == diff.only_published == 0
    assert diff.first_diff.position == position and diff.first_diff.fields == ("payload",)
    assert diff.first_diff.published.payload.text == "Hullo"
    assert diff.first_diff.expected.payload.text == old.payload.text
    lag = by_run[lagging.run_id]
    assert lag.verdict == "differs" and lag.prefix_only
    assert (lag.first_diff.position, lag.first_diff.fields) == (5, ("missing",))
    assert lag.only_expected == len(lagging.events) - 5

    assert cli(pipeline_settings, "parity") == 1
    out = capsys.readouterr().out
    assert f"differs  {changed.run_id}" in out
    assert f"first difference at seq {position}: payload" in out and '"Hullo"' in out
    assert "its tail is missing" in out
    assert f"missing  {unpublished.run_id}" in out
    assert "1 equal, 2 differs, 1 missing, 0 no frames" in out


CHANGED_KINDS = ("text.delta", "reasoning.delta")


def test_parity_after_an_adapter_fix(pipeline_settings: PipelineSettings,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    run = recorded("chat", FIXTURES / "openai-chat" / "reasoning-then-text.sse")
    publish(pipeline_settings, run)
    assert asyncio.run(checks.check_parity(pipeline_settings)).ok

    class Fixed(OpenAIChatAdapter):
        """A "fix" that changes what the adapter emits: text and reasoning deltas in upper case."""

        revision = OpenAIChatAdapter.revision + "-fixed"

        def emit(self, kind, payload):  # type: ignore[no-untyped-def]
            if kind in CHANGED_KINDS:
                payload = dataclasses.replace(payload, text=payload.text.upper())
            super().emit(kind, payload)

    monkeypatch.setitem(ADAPTERS, "openai-chat", Fixed)
    report = asyncio.run(checks.check_parity(pipeline_settings, run_id=run.run_id))
    [result] = report.runs
    deltas = [e for e in run.events
              if e.kind in CHANGED_KINDS and e.payload.text.upper() != e.payload.text]
    assert deltas
    assert result.verdict == "differs" and result.changed == len(deltas)
    assert result.first_diff.position == deltas[0].seq
    assert result.published_adapters != result.current_adapters
    assert cli(pipeline_settings, "parity", "--run-id", run.run_id, "--json") == 1
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["first_diff"]["fields"] == ["payload"]
    assert first["current_adapters"] == [f"{Fixed.name}@{Fixed.revision}"]


def test_parity_joins_frames_keyed_by_a_provider_object_id_to_their_run(
        pipeline_settings: PipelineSettings) -> None:
    """A poll of the run's response arrives keyed by the response id (as a poller or webhook
    knows only that): it belongs to the run that announced the id, not to a run of its own."""
    run = recorded("text")
    publish(pipeline_settings, run, timestamp_ms=BASE_MS)
    completed = next(f for f in run.frames if f.sse_event == "response.completed")
    response = json.loads(completed.body)["response"]
    poll = ProviderFrame(frame_id=f"poll-{response['id']}", run_key=response["id"],
                         provider=completed.provider, api=completed.api, transport="poll",
                         received_at=BASE_MS + 1, content_type="application/json",
                         body=json.dumps(response).encode(), stream_id="p1")
    produce(pipeline_settings, "frames",
            [(poll.run_key, codec.encode(f)) for f in with_end_markers([poll])],
            timestamp_ms=BASE_MS + 1)

    report = asyncio.run(checks.check_parity(pipeline_settings))
    assert [(r.run_id, r.verdict) for r in report.runs] == [(run.run_id, "equal")]
    assert report.runs[0].frames == len(run.frames) - 2 + 1  # its frames, no markers, the poll
    assert report.runs_from == "claims"  # no processor ran: the claims decide

    # Once a processor ran, its log decides: it re-keyed the poll to the run (a copy on its
    # rerouted topic, keyed by the run id) …
    rerouted = internal_topics(pipeline_settings)["rerouted"]
    create_topic(pipeline_settings, rerouted)
    produce(pipeline_settings, rerouted,
            [(run.run_id, codec.encode(f)) for f in with_end_markers([poll])])
    report = asyncio.run(checks.check_parity(pipeline_settings))
    assert report.runs_from == "processor"
    assert [(r.run_id, r.verdict) for r in report.runs] == [(run.run_id, "equal")]
    # … and a poll it did not re-key (it came before the claim) was a run of its own.
    late = dataclasses.replace(poll, frame_id="poll-again")
    produce(pipeline_settings, "frames", [(late.run_key, codec.encode(late))])
    report = asyncio.run(checks.check_parity(pipeline_settings))
    assert {r.run_id: r.verdict for r in report.runs} == {run.run_id: "equal",
                                                          poll.run_key: "missing"}


def create_topic(settings: PipelineSettings, name: str) -> None:
    async def go() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(name, num_partitions=settings.partitions,
                                                replication_factor=1)])
        finally:
            await admin.close()

    asyncio.run(go())


def test_parity_of_an_unknown_run_is_an_error(pipeline_settings: PipelineSettings,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(checks.NoSuchRun):
        asyncio.run(checks.check_parity(pipeline_settings, run_id="run-nope"))
    assert cli(pipeline_settings, "parity", "--run-id", "run-nope") == 2
    assert "no run run-nope: no frames on" in capsys.readouterr().err


# --- (c) export and import ----------------------------------------------------------------------


def test_export_is_a_standard_avro_file_and_import_gives_identical_records(
        make_settings: Callable[..., PipelineSettings], tmp_path: Path) -> None:
    source, target = make_settings(), make_settings()
    chosen, other = recorded("cassette"), recorded("text")
    publish(source, chosen)
    publish(source, other)
    out = tmp_path / "run.avro"

    result = asyncio.run(export.export_archive(source, out, export.Selection(run_id=chosen.run_id),
                                               with_frames=True))
    assert (result.events, result.frames) == (len(chosen.events), len(chosen.frames))

    # Any Avro reader: the schema is in the header, the records are plain Avro data.
    with out.open("rb") as fo:
        reader = fastavro.reader(fo)
        assert reader.metadata["avro.codec"] == "deflate"
        assert reader.metadata["modelevents.contents"] == "events+frames"
        plain = list(reader)
    assert len(plain) == len(chosen.events) + len(chosen.frames)
    events_in_file = [r for r in plain if "event_id" in r]
    assert [r["event_id"] for r in events_in_file] == [e.event_id for e in chosen.events]
    assert [r["seq"] for r in events_in_file] == list(range(len(chosen.events)))
    # … and read with the project's own schema as the reader schema.
    union = fastavro.parse_schema(archive.container_schema(with_frames=True), {})
    with out.open("rb") as fo:
        named = list(fastavro.reader(fo, reader_schema=union, return_record_name=True))
    assert {name for name, _ in named} == {archive.EVENT, archive.FRAME}

    imported = asyncio.run(export.import_archive(target, out))
    assert (imported.events, imported.frames) == (len(chosen.events), len(chosen.frames))
    for topic in ("events", "frames"):
        want = [(r.key, r.value) for r in snapshot(source, topic, chosen.run_id)]
        got = [(r.key, r.value) for r in snapshot(target, topic, chosen.run_id)]
        assert got == want and want  # same keys, byte-identical values, same order

    # Importing again only repeats records that consumers dedupe by (run_id, seq). (No memory
    # for the checked values this time: the file is read a second time to produce it.)
    asyncio.run(export.import_archive(target, out, with_frames=False, memory_budget=0))
    twice = [codec.decode(r.value) for r in snapshot(target, "events")]
    assert len(twice) == 2 * len(chosen.events)
    deduped, _ = checks.published_sequence(twice)
    assert [codec.encode(e) for e in deduped] == [codec.encode(e) for e in chosen.events]
    # The imported log is whole: parity holds on the target (its frames came along).
    assert asyncio.run(checks.check_parity(target)).ok


def test_export_a_time_range(make_settings: Callable[..., PipelineSettings], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    settings = make_settings()
    early, middle, late = recorded("text"), recorded("tools"), recorded("gemini")
    publish(settings, early, timestamp_ms=BASE_MS)
    publish(settings, middle, timestamp_ms=BASE_MS + HOUR)
    publish(settings, late, timestamp_ms=BASE_MS + 2 * HOUR)
    out = tmp_path / "middle.avro"

    assert cli(settings, "export", str(out), "--from-time", iso(BASE_MS + HOUR),
               "--to-time", iso(BASE_MS + 2 * HOUR)) == 0
    err = capsys.readouterr().err
    assert f"wrote {len(middle.events)} events of 1 run to {out}" in err
    schema = fastavro.parse_schema(json.loads((codec.AVRO_DIR / "model_event.avsc").read_text()))
    with out.open("rb") as fo:
        records = list(fastavro.reader(fo, reader_schema=schema))
    assert {r["run_id"] for r in records} == {middle.run_id}
    assert sorted(r["seq"] for r in records) == list(range(len(middle.events)))

    # Open-ended: everything from the middle hour on, frames included.
    both = asyncio.run(export.export_archive(
        settings, tmp_path / "tail.avro", export.Selection(from_ms=BASE_MS + HOUR),
        with_frames=True))
    assert both.runs == {middle.run_id, late.run_id}
    assert both.frames == len(middle.frames) + len(late.frames)


def test_export_and_import_errors(pipeline_settings: PipelineSettings, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = recorded("text")
    publish(pipeline_settings, run, timestamp_ms=BASE_MS)
    out = tmp_path / "x.avro"

    with pytest.raises(checks.NoSuchRun, match="no run run-nope"):
        asyncio.run(export.export_archive(pipeline_settings, out,
                                          export.Selection(run_id="run-nope")))
    with pytest.raises(checks.EmptyRange, match="nothing to export"):
        asyncio.run(export.export_archive(pipeline_settings, out,
                                          export.Selection(from_ms=BASE_MS + HOUR)))
    assert not out.exists() and not list(tmp_path.iterdir())  # no half-written file either
    with pytest.raises(ConfigError, match="say what to export"):
        export.Selection()
    with pytest.raises(ConfigError, match="empty time range"):
        export.Selection(from_ms=BASE_MS + HOUR, to_ms=BASE_MS)

    assert cli(pipeline_settings, "export", str(out), "--run-id", "run-nope") == 2
    assert "modelevents: error: no run run-nope" in capsys.readouterr().err

    not_avro = tmp_path / "notes.avro"
    not_avro.write_text("hello\n")
    assert cli(pipeline_settings, "import", str(not_avro)) == 2
    assert "is not an Avro object container file" in capsys.readouterr().err

    foreign = tmp_path / "foreign.avro"
    with foreign.open("wb") as fo:
        fastavro.writer(fo, {"type": "record", "name": "Other", "fields": [
            {"name": "x", "type": "int"}]}, [{"x": 1}])
    with pytest.raises(archive.ArchiveError, match="holds Other records"):
        asyncio.run(export.import_archive(pipeline_settings, foreign))

    good = tmp_path / "good.avro"
    asyncio.run(export.export_archive(pipeline_settings, good,
                                      export.Selection(run_id=run.run_id)))
    damaged = tmp_path / "damaged.avro"
    damaged.write_bytes(good.read_bytes()[:-40])
    before = len(snapshot(pipeline_settings, "events"))
    assert cli(pipeline_settings, "import", str(damaged)) == 2
    assert "damaged or truncated" in capsys.readouterr().err
    assert len(snapshot(pipeline_settings, "events")) == before  # nothing was produced

    missing = tmp_path / "missing.avro"
    assert cli(pipeline_settings, "import", str(missing)) == 2
    assert f"cannot read {missing}" in capsys.readouterr().err
    assert cli(pipeline_settings, "import", str(good), "--topic", "no-such-topic") == 2
    assert "topic no-such-topic does not exist" in capsys.readouterr().err


def test_the_installed_command_round_trips(make_settings: Callable[..., PipelineSettings],
                                           tmp_path: Path) -> None:
    """As a user runs it: a subprocess of the CLI, settings from the environment."""
    source, target = make_settings(), make_settings()
    run = recorded("tools")
    publish(source, run)
    out = tmp_path / "tools.avro"

    def modelevents(settings: PipelineSettings, *args: str) -> subprocess.CompletedProcess:
        env = {"KAFKA_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
               "MODELEVENTS_TOPIC_PREFIX": settings.topic_prefix, "PATH": "/usr/bin:/bin"}
        return subprocess.run([sys.executable, "-m", "modelevents.services.cli", "replay", *args],
                              capture_output=True, text=True, env=env, timeout=300)

    done = modelevents(source, "export", str(out), "--run-id", run.run_id, "--with-frames")
    assert done.returncode == 0, done.stderr
    assert "modelevents replay: wrote" in done.stderr
    done = modelevents(target, "import", str(out))
    assert done.returncode == 0, done.stderr
    assert f"imported {len(run.events)} events" in done.stderr
    state = modelevents(target, "state")
    assert state.returncode == 1 and f"missing  {run.run_id}" in state.stdout  # runs not imported
    parity = modelevents(target, "parity")
    assert parity.returncode == 0, parity.stdout + parity.stderr
    assert "1 equal" in parity.stdout


# --- against the real processor -----------------------------------------------------------------

# Runs `modelevents worker` from its command module, whether or not the CLI lists it yet.
WORKER = ("import sys, argparse; from modelevents.services.cli.commands import worker; "
          "p = argparse.ArgumentParser(prog='modelevents'); s = p.add_subparsers(); "
          "worker.register(s); a = p.parse_args(['worker', *sys.argv[1:]]); "
          "sys.exit(a.run(a) or 0)")
HANG_GUARD_S = 240.0  # a guard against a hang, not a timing assertion


@pytest.fixture
def worker(make_settings: Callable[..., PipelineSettings], tmp_path: Path):
    """A real `modelevents worker` (own process group) on fresh topics; killed at the end."""
    settings = make_settings(partitions=2)
    log_path = tmp_path / "worker.log"
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", WORKER, "--bootstrap-servers", settings.bootstrap_servers,
             "--prefix", settings.topic_prefix, "--partitions", str(settings.partitions),
             "--app-id", settings.app_id, "--workdir", str(tmp_path / "work"),
             "--session-timeout", "10"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while " ready: " not in log_path.read_text(errors="replace"):
            assert process.poll() is None, log_path.read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")[-4000:]
            time.sleep(0.2)
        yield settings
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_replay_agrees_with_what_the_processor_published(
        worker: PipelineSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every project fixture fed as frames (duplicates included) through the real processor:
    the state rebuilt from `events` equals `runs`, re-normalizing `frames` equals `events`; then
    an adapter changes and parity finds the runs it changes."""
    settings = worker
    paths = sorted(p for p in FIXTURES.glob("*/*") if p.is_file())
    frames = []
    for path in paths:
        fed = frames_for_file(path)
        frames += with_end_markers(fed.frames)
        frames += fed.frames[:2]  # a gateway retry: the same frames once more
    produce(settings, "frames", [(f.run_key, codec.encode(f)) for f in frames])

    deadline = time.monotonic() + HANG_GUARD_S
    while True:  # until the processor caught up (the log is then quiet)
        parity = asyncio.run(checks.check_parity(settings))
        if parity.ok or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    assert parity.ok, [(r.run_id, r.verdict, r.first_diff, r.notes) for r in parity.runs
                       if r.verdict != "equal"]
    assert len(parity.runs) == len(paths)
    state = asyncio.run(checks.check_state(settings))
    assert state.ok and state.count("equal") == len(paths), [
        (c.run_id, c.verdict, c.diffs, c.note) for c in state.runs if c.verdict != "equal"]

    # Then an adapter is "fixed" (here: it upper-cases text deltas). Parity names exactly the
    # runs whose published events the fix changes, and where each first differs.
    api = "anthropic-messages"
    base = ADAPTERS[api]
    fixed = type("Fixed", (base,), {
        "revision": base.revision + "-fixed",
        "emit": lambda self, kind, payload: base.emit(
            self, kind, dataclasses.replace(payload, text=payload.text.upper())
            if kind == "text.delta" else payload)})
    published = {c.run_id: checks.published_sequence(
        codec.decode(r.value) for r in snapshot(settings, "events", c.run_id))[0]
        for c in state.runs}
    changed = {run_id: next(e.seq for e in events if e.kind == "text.delta"
                            and e.payload.text.upper() != e.payload.text)
               for run_id, events in published.items()
               if events[0].api == api and any(e.kind == "text.delta" and e.payload.text.upper()
                                                != e.payload.text for e in events)}
    assert changed
    monkeypatch.setitem(ADAPTERS, api, fixed)
    after = asyncio.run(checks.check_parity(settings))
    assert {r.run_id: r.first_diff.position for r in after.runs if r.verdict != "equal"} == changed
    assert all(r.first_diff.fields == ("payload",) for r in after.runs if r.verdict != "equal")
