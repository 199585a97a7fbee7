"""What the pipeline tests share (test_processor, test_corpus_pipeline, test_broker_restart,
test_gateway_*): the worker as a subprocess, feeding frames, reading what the pipeline published,
and the comparison with ``modelevents normalize``. The fixtures built on them (``settings``,
``start_worker``) are in conftest.py.

- :class:`Worker`: one ``modelevents worker`` subprocess, started as users start it, in its own
  process group (so that it can be SIGKILLed mid-run), its log in a file;
- :func:`feed` / :func:`produce_raw`: frames (or any bytes) onto a topic, as the gateway would;
- :func:`collect`: ``events``, ``runs`` and ``dlq`` read from the beginning until a condition
  holds — a guard against a hang (:data:`HANG_GUARD_S`), never a timing assertion;
- :func:`committed` / :func:`claim_recorded`: wait until the worker committed records of a topic
  / recorded a run's claim of a provider object id;
- :func:`assert_run_as_normalized`: after dedupe by ``(run_id, seq)``, exactly the events
  ``modelevents normalize`` gives for the file (``seq`` 0..n-1), no two different events under
  one ``seq``, and the last RunState equal to the one the run machine folds from them.
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
from collections.abc import Callable
from pathlib import Path

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from modelevents.adapters.registry import normalize_file
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.run_state import DeadLetter, RunState
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import changelog_topics
from modelevents.services.local import feeder
from modelevents.services.run_logic.run_machine import run_state_of
from tests.paths import FIXTURES

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


# --- feeding and reading --------------------------------------------------------------------


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, HANG_GUARD_S))


def kafka_args(settings: PipelineSettings) -> list[str]:
    """The CLI options that point a ``modelevents`` command at ``settings``' broker and topics."""
    return ["--bootstrap-servers", settings.bootstrap_servers, "--prefix", settings.topic_prefix]


def start_gateway_process(settings: PipelineSettings, port: int, log_path: Path,
                          *options: str, ready_within: float = 90.0,
                          config: Path | None = None, gateway_options: tuple[str, ...] = (),
                          env: dict[str, str] | None = None) -> subprocess.Popen:
    """``modelevents [OPTIONS] gateway [--config CONFIG] [GATEWAY_OPTIONS]`` as a user starts
    it, with ``env`` over this process's environment, in a session of its own (stop it with
    ``os.killpg``), its stderr in ``log_path``; returned once ``/readyz`` answers 200."""
    import httpx

    with log_path.open("wb") as log:
        gateway = subprocess.Popen(
            [sys.executable, "-m", "modelevents.services.cli", *options, "gateway",
             "--port", str(port), *kafka_args(settings), "--partitions", str(settings.partitions),
             *(["--config", str(config)] if config is not None else []), *gateway_options],
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    deadline = time.monotonic() + ready_within
    while True:
        if gateway.poll() is not None or time.monotonic() > deadline:
            if gateway.poll() is None:
                os.killpg(gateway.pid, signal.SIGKILL)
            raise AssertionError("the gateway did not get ready:\n"
                                 + log_path.read_text(errors="replace")[-3000:])
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                return gateway
        except httpx.HTTPError:
            pass
        time.sleep(0.2)


def fixture_frames(path: Path, **kw) -> tuple[str, list[ProviderFrame]]:
    # received_at=0: the run state's timestamps then equal those of the offline driver.
    fed = feeder.frames_for_file(path, received_at=0, **kw)
    return fed.run_id, with_end_markers(fed.frames)


async def feed(settings: PipelineSettings, frames: list[ProviderFrame], duplicate: float = 0.0,
               rate: float | None = None, seed: int = 0) -> None:
    producer = await clients.start_producer(settings)
    try:
        await feeder.feed_frames(producer, settings, frames, duplicate=duplicate, rate=rate, seed=seed)
    finally:
        await producer.stop()


async def produce_raw(settings: PipelineSettings, topic: str, key: bytes, value: bytes) -> None:
    producer = await clients.start_producer(settings)
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
    consumer = clients.make_consumer(settings)
    await clients.start_client(consumer, settings)
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
    assert got == expected, f"{path.name}: {_first_difference(got, expected)}"
    assert published.runs[run_id] == run_state_of(expected), path.name


def _first_difference(got: list[ModelEvent], expected: list[ModelEvent]) -> str:
    for a, b in zip(got, expected):
        for field in dataclasses.fields(b):
            if getattr(a, field.name) != getattr(b, field.name):
                return (f"seq {b.seq} ({b.kind}) differs in {field.name}: got "
                        f"{str(getattr(a, field.name))[:300]}, expected "
                        f"{str(getattr(b, field.name))[:300]}")
    return "equal"


def expected_counts(paths: list[Path]) -> dict[str, int]:
    return {normalize_file(p).run_id: len(normalize_file(p).events) for p in paths}



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


async def committed(settings: PipelineSettings, topic: str, count: int) -> None:
    """Wait until the worker's group committed ``count`` records of ``topic`` (all partitions)."""
    await _commits_reach(settings, lambda offsets: sum(
        meta.offset for tp, meta in offsets.items()
        if tp.topic == topic and meta.offset > 0) >= count,
        f"the worker did not commit {count} records of {topic}")


async def processed_to_end(settings: PipelineSettings, topic: str) -> None:
    """Wait until the worker's group committed every record ``topic`` holds now (each of its
    partitions up to the end offset it has at the call)."""
    consumer = clients.make_consumer(settings)
    await clients.start_client(consumer, settings)
    try:
        ends = await consumer.end_offsets(
            [TopicPartition(topic, p) for p in range(settings.partitions)])
    finally:
        await consumer.stop()
    await _commits_reach(settings, lambda offsets: all(
        end == 0 or (tp in offsets and offsets[tp].offset >= end) for tp, end in ends.items()),
        f"the worker did not commit {topic} up to {ends}")


async def _commits_reach(settings: PipelineSettings, done: Callable[[dict], bool],
                         failure: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    try:
        deadline = time.monotonic() + HANG_GUARD_S / 2
        while time.monotonic() < deadline:
            if done(await admin.list_consumer_group_offsets(settings.app_id)):
                return
            await asyncio.sleep(0.3)
    finally:
        await admin.close()
    raise AssertionError(failure)


async def claim_recorded(settings: PipelineSettings, object_id: str) -> None:
    """Wait until the alias agent recorded the run's claim of ``object_id`` (its changelog has
    it): from then on a frame keyed by the object id is routed to the run."""
    topic = changelog_topics(settings)["aliases"]
    deadline = time.monotonic() + HANG_GUARD_S / 2
    while time.monotonic() < deadline:
        try:
            async for record in clients.read_records(settings, topic, timeout=0.5):
                if record.key == object_id.encode():
                    return
        except Exception:
            pass
        await asyncio.sleep(0.2)
    raise AssertionError(f"no claim of {object_id} recorded in {topic}")
