"""The stream processor against a real Kafka broker, run as users run it.

Each worker is a subprocess started like a user starts it (``python -m modelevents.services.cli
worker …``) in its own process group, so it can be SIGKILLed mid-run; a finalizer kills every
worker a test started. This module runs its own broker (19600 + 10 * xdist worker, controller on
port + 1, temp state dir) and every test gets its own topics and app id.

What is checked, for every run fed: the events on ``events``, after dedupe by ``(run_id, seq)``,
are exactly the events ``modelevents normalize`` gives for the same file (the whole record: id,
kind, payload, source, envelope, ``seq`` 0..n-1), no two different events share a ``seq``, and the
last record on ``runs`` equals the state the run machine folds from those events.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from modelevents.adapters.registry import normalize_file, translate
from modelevents.schemas import codec
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.run_state import DeadLetter, RunState
from modelevents.services import feeder, kafka_io
from modelevents.services.normalizer import end_of_input, is_end_of_input, with_end_markers
from modelevents.services.processor import changelog_topics, internal_topics
from modelevents.services.run_machine import run_state_of
from modelevents.services.settings import PipelineSettings
from tests.integration.conftest import broker_fixture

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19600, scope="module")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# Directories of tests/fixtures that hold no provider recordings (the provider simulator's
# scenarios).
NOT_RECORDINGS = {"simulator"}


def own_recordings() -> list[Path]:
    """Every recorded provider stream or object of the project's own fixtures."""
    return sorted(p for p in FIXTURES.rglob("*")
                  if p.is_file() and p.relative_to(FIXTURES).parts[0] not in NOT_RECORDINGS)

# One recorded run per provider API (several showing what the end of input means), and the
# tool-loop cassette: one run over three provider calls.
ONE_PER_API = [
    FIXTURES / "openai-responses" / "tool-call-parallel.sse",
    FIXTURES / "openai-chat" / "finished-without-done.jsonl",
    FIXTURES / "anthropic-messages" / "truncated-in-tool-input.sse",
    FIXTURES / "gemini-generate" / "grounding-citations.sse",
    FIXTURES / "gemini-interactions" / "poll-running.json",
    FIXTURES / "cassettes" / "anthropic-tool-loop.yaml",
]
# A guard against a hang, not a timing assertion: a correct pipeline ends long before it.
HANG_GUARD_S = 180.0
PARTITIONS = 3


# --- workers --------------------------------------------------------------------------------


class Worker:
    """One `modelevents worker` subprocess (own process group), its log in a file."""

    def __init__(self, settings: PipelineSettings, workdir: Path, name: str,
                 extra: tuple[str, ...] = ()) -> None:
        self.log_path = workdir / f"{name}.log"
        workdir.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "modelevents.services.cli", "worker",
             "--bootstrap-servers", settings.bootstrap_servers, "--prefix", settings.topic_prefix,
             "--partitions", str(settings.partitions), "--app-id", settings.app_id,
             "--workdir", str(workdir / name), "--batch-size", "200",
             # A SIGKILLed worker's partitions move after this; the default 30 s only slows tests.
             "--session-timeout", "10", *extra],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, env=env)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + HANG_GUARD_S
        while " ready: " not in self.log_text():
            if self.process.poll() is not None:
                raise AssertionError(f"worker exited with {self.process.returncode} before it was "
                                     f"ready:\n{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"worker not ready:\n{self.log_text()[-4000:]}")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown code runs, nothing is committed."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def terminate(self) -> int:
        """SIGTERM, as a service manager stops it; the worker's exit status."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"worker ignored SIGTERM:\n{self.log_text()[-4000:]}") from None

    def close(self) -> None:
        self.kill()
        self._log.close()


@pytest.fixture
def settings(make_settings: Callable[..., PipelineSettings]) -> PipelineSettings:
    return make_settings(partitions=PARTITIONS)


@pytest.fixture
def start_worker(settings: PipelineSettings, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(name: str = "worker", wait: bool = True, extra: tuple[str, ...] = ()) -> Worker:
        worker = Worker(settings, tmp_path, f"{name}-{len(workers)}", extra)
        workers.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    start.logs = lambda name: [line for w in workers if w.log_path.stem.startswith(name)
                               for line in w.log_text().splitlines()]
    yield start
    for worker in workers:
        worker.close()


# --- feeding and reading --------------------------------------------------------------------


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, HANG_GUARD_S))


def fixture_frames(path: Path, **kw) -> tuple[str, list[ProviderFrame]]:
    # received_at=0: the run state's timestamps then equal those of the offline driver.
    fed = feeder.frames_for_file(path, received_at=0, **kw)
    return fed.run_id, with_end_markers(fed.frames)


async def feed(settings: PipelineSettings, frames: list[ProviderFrame], duplicate: float = 0.0,
               rate: float | None = None, seed: int = 0) -> None:
    producer = await kafka_io.start_producer(settings)
    try:
        await feeder.feed_frames(producer, settings, frames, duplicate=duplicate, rate=rate, seed=seed)
    finally:
        await producer.stop()


async def produce_raw(settings: PipelineSettings, topic: str, key: bytes, value: bytes) -> None:
    producer = await kafka_io.start_producer(settings)
    try:
        await producer.send_and_wait(settings.topic(topic), value, key=key)
    finally:
        await producer.stop()


@dataclasses.dataclass
class Published:
    events: dict[str, list[ModelEvent]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    runs: dict[str, RunState] = dataclasses.field(default_factory=dict)
    dead: list[DeadLetter] = dataclasses.field(default_factory=list)

    def deduped(self, run_id: str) -> dict[int, ModelEvent]:
        by_seq: dict[int, ModelEvent] = {}
        for event in self.events[run_id]:
            first = by_seq.setdefault(event.seq, event)
            assert first == event, f"run {run_id}: two different events with seq {event.seq}"
        return by_seq

    def complete(self, run_id: str, count: int) -> bool:
        state = self.runs.get(run_id)
        return (state is not None and state.last_seq == count - 1
                and len({e.seq for e in self.events[run_id]}) >= count)


async def collect(settings: PipelineSettings, until: Callable[[Published], bool],
                  describe: Callable[[], str] = lambda: "") -> Published:
    """Read events, runs and dlq from the beginning until ``until`` holds (or the hang guard)."""
    published = Published()
    consumer = kafka_io.make_consumer(settings)
    await kafka_io.start_client(consumer, settings)
    try:
        names = {settings.topic(t): t for t in ("events", "runs", "dlq")}
        assigned = [TopicPartition(name, p) for name in names for p in range(settings.partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        deadline = time.monotonic() + HANG_GUARD_S - 10
        while not until(published):
            if time.monotonic() > deadline:
                raise AssertionError(f"the pipeline did not finish; {describe()}\nruns: "
                                     f"{ {r: s.last_seq for r, s in published.runs.items()} }")
            batches = await consumer.getmany(timeout_ms=200)
            for tp, records in batches.items():
                for record in records:
                    value = codec.decode(record.value)
                    kind = names[tp.topic]
                    if kind == "events":
                        published.events[value.run_id].append(value)
                    elif kind == "runs":
                        published.runs[value.run_id] = value
                    else:
                        published.dead.append(value)
        return published
    finally:
        await consumer.stop()


def assert_run_as_normalized(published: Published, path: Path) -> None:
    expected = normalize_file(path).events
    run_id = expected[0].run_id
    by_seq = published.deduped(run_id)
    assert sorted(by_seq) == list(range(len(expected))), f"{path.name}: seq gaps or extras"
    got = [by_seq[seq] for seq in range(len(expected))]
    assert [e.kind for e in got] == [e.kind for e in expected], path.name
    assert got == expected, path.name
    assert published.runs[run_id] == run_state_of(expected), path.name


def expected_counts(paths: list[Path]) -> dict[str, int]:
    return {normalize_file(p).run_id: len(normalize_file(p).events) for p in paths}


# --- the tests ------------------------------------------------------------------------------


def test_events_and_runs_equal_what_normalize_gives(settings: PipelineSettings, start_worker) -> None:
    worker = start_worker()
    frames = [f for path in ONE_PER_API for f in fixture_frames(path)[1]]
    run(feed(settings, frames, duplicate=0.3, seed=7))
    counts = expected_counts(ONE_PER_API)
    published = run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items()),
                            worker.log_text))
    for path in ONE_PER_API:
        assert_run_as_normalized(published, path)
    assert published.dead == []
    assert worker.terminate() == 0
    assert "stopped (exit status 0)" in worker.log_text()


def halves(paths: list[Path]) -> tuple[list[ProviderFrame], list[ProviderFrame]]:
    """Every run's frames cut in two, so that every run straddles what happens in between."""
    first: list[ProviderFrame] = []
    second: list[ProviderFrame] = []
    for path in paths:
        frames = fixture_frames(path)[1]
        cut = len(frames) // 2
        first += frames[:cut]
        second += frames[cut:]
    return first, second


def test_sigkill_mid_feed_then_restart_loses_nothing(settings: PipelineSettings, start_worker) -> None:
    paths = own_recordings()
    before, after = halves(paths)
    counts = expected_counts(paths)
    first = start_worker("first")

    async def scenario() -> Published:
        feeding = asyncio.ensure_future(feed(settings, before, duplicate=0.2, rate=300, seed=3))
        # Kill while the worker is busy: batches in flight, offsets not yet committed.
        await collect(settings, lambda p: sum(len(v) for v in p.events.values()) >= 60)
        first.kill()
        assert not feeding.done(), "the feed ended before the kill; feed slower"
        await feeding
        second = await asyncio.to_thread(start_worker, "second")
        await feed(settings, after, duplicate=0.2, seed=4)
        return await collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items()),
                             lambda: second.log_text()[-3000:])

    published = run(scenario())
    for path in paths:
        assert_run_as_normalized(published, path)


def test_sigterm_mid_feed_stops_cleanly_and_a_restart_loses_nothing(settings: PipelineSettings,
                                                                   start_worker) -> None:
    paths = sorted((FIXTURES / "gemini-generate").glob("*")) + sorted(
        (FIXTURES / "openai-chat").glob("*"))
    before, after = halves(paths)
    counts = expected_counts(paths)
    first = start_worker("first")

    async def scenario() -> Published:
        feeding = asyncio.ensure_future(feed(settings, before, duplicate=0.2, rate=200, seed=8))
        await collect(settings, lambda p: sum(len(v) for v in p.events.values()) >= 30)
        # Stopped as a service manager stops it, with batches in flight.
        status = await asyncio.to_thread(first.terminate)
        assert status == 0, first.log_text()[-3000:]
        await feeding
        await asyncio.to_thread(start_worker, "second")
        await feed(settings, after, duplicate=0.2, seed=9)
        return await collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items()))

    published = run(scenario())
    for path in paths:
        assert_run_as_normalized(published, path)
    assert "stopped (exit status 0)" in first.log_text()


def test_a_second_worker_joining_takes_over_partitions(settings: PipelineSettings,
                                                       start_worker) -> None:
    paths = sorted((FIXTURES / "openai-responses").glob("*.sse")) + sorted(
        (FIXTURES / "anthropic-messages").glob("*.sse"))
    before, after = halves(paths)
    counts = expected_counts(paths)
    first = start_worker("first")

    async def scenario() -> Published:
        feeding = asyncio.ensure_future(feed(settings, before, duplicate=0.1, rate=150, seed=5))
        await collect(settings, lambda p: sum(len(v) for v in p.events.values()) >= 20)
        # Joins while the first worker is busy: the rebalance happens mid-batch, mid-run.
        second = await asyncio.to_thread(start_worker, "second")
        await feeding
        await feed(settings, after, duplicate=0.1, seed=6)
        published = await collect(
            settings, lambda p: all(p.complete(r, n) for r, n in counts.items()),
            lambda: first.log_text()[-2000:] + second.log_text()[-2000:])
        assert first.process.poll() is None and second.process.poll() is None
        return published

    published = run(scenario())
    for path in paths:
        assert_run_as_normalized(published, path)
    # The second worker took partitions over (and recovered their adapters from the changelog).
    taken = [line for line in start_worker.logs("second") if "processing partitions" in line]
    assert taken and "processing partitions none" not in taken[-1]


def test_undecodable_frame_goes_to_dlq_and_the_stream_goes_on(settings: PipelineSettings,
                                                              start_worker) -> None:
    start_worker()
    path = FIXTURES / "openai-chat" / "refusal.sse"
    run_id, frames = fixture_frames(path)
    garbage = b"\xc3\x01 this is not an Avro record"

    async def scenario() -> Published:
        await feed(settings, frames[:2])
        await produce_raw(settings, "frames", run_id.encode(), garbage)
        await feed(settings, frames[2:])
        count = len(normalize_file(path).events)
        return await collect(settings, lambda p: p.complete(run_id, count) and p.dead)

    published = run(scenario())
    assert_run_as_normalized(published, path)
    [letter] = published.dead
    assert (letter.stage, letter.run_key, letter.record) == ("decode", run_id, garbage)
    assert letter.topic == settings.topic("frames") and letter.offset is not None


def test_illegal_transition_is_published_dead_lettered_and_flagged(settings: PipelineSettings,
                                                                   start_worker) -> None:
    start_worker()
    # One run, two provider responses: the second starts after the first one finished the run —
    # run.started after run.finished is an illegal transition.
    first = FIXTURES / "openai-responses" / "text-with-usage.sse"
    second = FIXTURES / "openai-responses" / "refusal.sse"
    run_id = "run-illegal-transition"
    frames = (feeder.frames_for_file(first, run_id=run_id, received_at=0).frames
              + [dataclasses.replace(f, frame_id=f"s1:{f.index}", stream_id="s1")
                 for f in feeder.frames_for_file(second, run_id=run_id, received_at=0).frames])
    expected = translate(frames, "openai-responses", run_id)
    for seq, event in enumerate(expected):
        event.seq = seq

    published = run(_feed_and_collect(settings, with_end_markers(frames), run_id, len(expected)))
    by_seq = published.deduped(run_id)
    assert [by_seq[s] for s in range(len(expected))] == expected  # published: it happened
    state = published.runs[run_id]
    assert state.needs_reconciliation and state == run_state_of(expected)
    [letter] = published.dead
    illegal = next(e for e in expected[1:] if e.kind == "run.started")
    assert (letter.stage, letter.error_type, letter.run_key) == ("apply", "IllegalTransition", run_id)
    assert codec.decode(letter.record) == illegal
    assert "after the run ended completed" in letter.reason


def test_poll_keyed_by_provider_object_id_finds_its_run(settings: PipelineSettings,
                                                        start_worker) -> None:
    start_worker()
    # A background response: the gateway starts run "bg-run" and publishes the first poll under
    # the run id; later polls come from a poller that only knows the response id.
    run_id = "bg-run"
    polls = ["poll-1-queued.json", "poll-2-in-progress-partial.json", "poll-3-completed.json"]
    frames = []
    for number, name in enumerate(polls, 1):
        [frame] = feeder.frames_for_file(FIXTURES / "openai-responses" / name, run_id=run_id,
                                         received_at=0).frames
        frames.append(dataclasses.replace(frame, frame_id=f"p{number}:0", stream_id=f"p{number}"))
    object_id = orjson.loads(frames[0].body)["id"]
    by_object = [dataclasses.replace(f, run_key=object_id) for f in frames[1:]]
    expected = translate(frames, "openai-responses", run_id)
    for seq, event in enumerate(expected):
        event.seq = seq

    async def scenario() -> Published:
        await feed(settings, frames[:1])
        await _claim_recorded(settings, object_id)
        await feed(settings, by_object + [end_of_input(by_object[-1], "run")])
        return await collect(settings, lambda p: p.complete(run_id, len(expected)))

    published = run(scenario())
    by_seq = published.deduped(run_id)
    assert [by_seq[s] for s in range(len(expected))] == expected
    assert published.runs[run_id].status == "completed"
    assert object_id not in published.runs and object_id not in published.events
    assert published.runs[run_id].provider_object_ids == [object_id]


def test_a_resumed_stream_that_overlaps_the_first_adds_nothing_twice(settings: PipelineSettings,
                                                                       start_worker) -> None:
    start_worker()
    # The connection drops after two thirds of an OpenAI Responses stream; the gateway resumes
    # it (GET /v1/responses/{id}?stream=true&starting_after=N) from an earlier N, so the new
    # stream repeats frames the first one delivered, with the same sequence numbers, under a
    # stream id of its own — and without an end-of-stream marker in between (one logical stream).
    path = FIXTURES / "openai-responses" / "text-with-usage.sse"
    run_id, first = fixture_frames(path)
    first = [f for f in first if not is_end_of_input(f)]
    cut, resume_from = len(first) * 2 // 3, len(first) // 3
    resumed = [dataclasses.replace(f, stream_id="s1", frame_id=f"s1:{n}", index=n)
               for n, f in enumerate(first[resume_from:])]
    frames = first[:cut] + resumed
    frames += [end_of_input(frames[-1], "stream"), end_of_input(frames[-1], "run")]
    expected = normalize_file(path).events

    published = run(_feed_and_collect(settings, frames, run_id, len(expected), dead=False))
    by_seq = published.deduped(run_id)
    assert sorted(by_seq) == list(range(len(expected))), "nothing lost, nothing numbered twice"
    got = [by_seq[seq] for seq in range(len(expected))]
    # The same events; those translated after the cut name the resumed stream's frames.
    assert [(e.kind, e.payload, e.envelope) for e in got] == [
        (e.kind, e.payload, e.envelope) for e in expected]
    assert {e.source.frame_id.partition(":")[0] for e in got} == {"s0", "s1"}
    assert len({e.event_id for e in published.events[run_id]}) == len(expected)
    assert published.runs[run_id] == run_state_of(got) and published.runs[run_id].status == "completed"
    assert published.dead == []


def test_a_webhook_before_the_stream_of_the_same_object_loses_and_duplicates_nothing(
        settings: PipelineSettings, start_worker) -> None:
    start_worker()
    # OpenAI's webhook for a response (keyed by the response id: all the gateway knows) arrives
    # before the stream that announces that id; then the gateway fetches the response (a poll,
    # keyed by the id too). The webhook names the event only, so it adds no event; the stream's
    # run claims the id; the poll is routed to the stream's run, which has said it all already.
    path = FIXTURES / "openai-responses" / "text-with-usage.sse"
    run_id, stream = fixture_frames(path)
    response = orjson.loads(next(f for f in reversed(stream) if not is_end_of_input(f)).body)
    object_id = response["response"]["id"]
    webhook = ProviderFrame(
        frame_id="wh_1", run_key=object_id, provider="openai", api="openai-responses",
        transport="webhook", received_at=0, content_type="application/json", stream_id="wh_1",
        body=orjson.dumps({"object": "event", "id": "evt_1", "type": "response.completed",
                           "created_at": 1767225600, "data": {"id": object_id}}))
    poll = ProviderFrame(
        frame_id="p1:0", run_key=object_id, provider="openai", api="openai-responses",
        transport="poll", received_at=0, content_type="application/json", stream_id="p1",
        body=orjson.dumps(response["response"]))
    expected = normalize_file(path).events

    async def scenario() -> Published:
        await feed(settings, [webhook])
        await feed(settings, stream)
        await _claim_recorded(settings, object_id)
        await feed(settings, [poll, end_of_input(poll, "stream")])
        # Both went to the stream's run, which committed them: whatever they gave is published.
        await _committed(settings, internal_topics(settings)["rerouted"], 2)
        return await collect(settings, lambda p: p.complete(run_id, len(expected)))

    published = run(scenario())
    assert_run_as_normalized(published, path)
    assert len(published.events[run_id]) == len(expected), "nothing duplicated"
    assert object_id not in published.events and object_id not in published.runs
    assert published.dead == []


async def _committed(settings: PipelineSettings, topic: str, count: int) -> None:
    """Wait until the worker's group committed ``count`` records of ``topic`` (all partitions)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    try:
        deadline = time.monotonic() + HANG_GUARD_S / 2
        while time.monotonic() < deadline:
            offsets = await admin.list_consumer_group_offsets(settings.app_id)
            if sum(meta.offset for tp, meta in offsets.items()
                   if tp.topic == topic and meta.offset > 0) >= count:
                return
            await asyncio.sleep(0.5)
    finally:
        await admin.close()
    raise AssertionError(f"the worker did not commit {count} records of {topic}")


async def _feed_and_collect(settings: PipelineSettings, frames: list[ProviderFrame], run_id: str,
                            count: int, dead: bool = True) -> Published:
    await feed(settings, frames, duplicate=0.2, seed=11)
    return await collect(settings, lambda p: p.complete(run_id, count) and (bool(p.dead) or not dead))


async def _claim_recorded(settings: PipelineSettings, object_id: str) -> None:
    """Wait until the alias agent recorded the run's claim of ``object_id`` (its changelog has
    it): from then on a frame keyed by the object id is routed to the run."""
    topic = changelog_topics(settings)["aliases"]
    deadline = time.monotonic() + HANG_GUARD_S / 2
    while time.monotonic() < deadline:
        try:
            async for record in kafka_io.read_records(settings, topic, timeout=0.5):
                if record.key == object_id.encode():
                    return
        except Exception:  # noqa: BLE001 - the changelog topic appears with the first write
            pass
        await asyncio.sleep(0.2)
    raise AssertionError(f"no claim of {object_id} recorded in {topic}")


def test_a_terminal_runs_state_is_released_after_the_retention_period(
        settings: PipelineSettings, start_worker) -> None:
    start_worker(extra=("--retention", "1"))
    path = FIXTURES / "openai-responses" / "text-with-usage.sse"
    run_id, frames = fixture_frames(path)
    count = len(normalize_file(path).events)

    async def scenario() -> None:
        await feed(settings, frames)
        await collect(settings, lambda p: p.complete(run_id, count))
        # Released = deleted from the table: a tombstone for the run on its changelog.
        await _tombstone(settings, changelog_topics(settings)["run"], run_id)

    run(scenario())


def test_the_worker_refuses_missing_or_mismatched_topics(
        make_settings: Callable[..., PipelineSettings], tmp_path: Path) -> None:
    missing = make_settings(create_topics=False)
    mismatched = make_settings(partitions=2)

    def worker(settings: PipelineSettings, partitions: int) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "modelevents.services.cli", "worker",
             "--bootstrap-servers", settings.bootstrap_servers, "--prefix", settings.topic_prefix,
             "--partitions", str(partitions), "--app-id", settings.app_id,
             "--workdir", str(tmp_path)],
            capture_output=True, text=True, timeout=HANG_GUARD_S)

    refused = worker(missing, 2)
    assert refused.returncode == 2, refused.stderr
    assert "topics missing" in refused.stderr and "modelevents topics create" in refused.stderr
    refused = worker(mismatched, 3)
    assert refused.returncode == 2, refused.stderr
    assert "has 2 partitions, expected 3" in refused.stderr


async def _tombstone(settings: PipelineSettings, topic: str, key: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_S / 2
    while time.monotonic() < deadline:
        async for record in kafka_io.read_records(settings, topic, timeout=0.5):
            if record.key == key.encode() and record.raw is None:
                return
        await asyncio.sleep(0.5)
    raise AssertionError(f"no tombstone for {key} on {topic}")
