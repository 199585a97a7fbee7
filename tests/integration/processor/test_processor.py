"""The stream processor against a real Kafka broker, run as users run it.

Each worker is a subprocess started like a user starts it (``python -m modelevents.services.cli
worker …``) in its own process group, so it can be SIGKILLed mid-run; a finalizer kills every
worker a test started. This module runs its own broker (19600 + 10 * xdist worker, controller on
port + 1, temp state dir) and every test gets its own topics and app id.

What is checked, for every run fed: the events on ``events``, after dedupe by ``(run_id, seq)``,
are exactly the events ``modelevents normalize`` gives for the same file (the whole record: id,
kind, payload, source, envelope, ``seq`` 0..n-1), no two different events share a ``seq``, and the
last record on ``runs`` equals the state the run machine folds from those events. The worker,
feeding and reading are tests/integration/pipeline.py's; the fixtures ``settings`` and
``start_worker`` conftest.py's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from modelevents.adapters.registry import normalize_file, translate
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import end_of_input, with_end_markers
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import changelog_topics
from modelevents.services.local import feeder
from modelevents.services.run_logic.run_machine import run_state_of
from tests.integration.conftest import broker_fixture
from tests.integration.pipeline import (
    FIXTURES,
    HANG_GUARD_S,
    ONE_PER_API,
    Published,
    assert_run_as_normalized,
    claim_recorded,
    collect,
    expected_counts,
    feed,
    fixture_frames,
    halves,
    own_recordings,
    produce_raw,
    run,
)

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19600, scope="module")



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


def test_a_backlog_beyond_the_stream_buffer_pauses_fetching_and_loses_nothing(
        settings: PipelineSettings, start_worker) -> None:
    # Every own recording fed before the worker starts, with a stream buffer of 32 records: the
    # consumer hands the run agent whole fetches, fills its queue past the pressure mark over and
    # over, stops fetching those partitions and resumes them as the agent drains the queue.
    paths = own_recordings()
    frames = [f for path in paths for f in fixture_frames(path)[1]]
    assert len(frames) > 15 * 32
    run(feed(settings, frames, duplicate=0.1, seed=5))
    worker = start_worker(extra=("--stream-buffer", "32"))
    counts = expected_counts(paths)
    published = run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items()),
                            lambda: worker.log_text()[-3000:]))
    for path in paths:
        assert_run_as_normalized(published, path)
    # (Several recordings are polls of one provider object, each fed as a run of its own.)
    assert {letter.error_type for letter in published.dead} <= {"ClaimConflict"}


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


def test_a_record_of_another_tenant_reaching_a_run_is_dead_lettered_not_applied(
        settings: PipelineSettings, start_worker) -> None:
    start_worker()
    path = FIXTURES / "openai-chat" / "refusal.sse"
    run_id, frames = fixture_frames(path)  # tenant "default"
    # Keyed by the run's id, but another tenant's: a frame (of a stream of its own, so no frame
    # id repeats) and an ingest event.
    intruder = dataclasses.replace(frames[1], tenant="acme", stream_id="x", frame_id="x:0")
    expected = normalize_file(path).events
    ingested = dataclasses.replace(expected[-1], event_id="acme-event", tenant="acme", seq=-1)

    async def scenario() -> Published:
        await feed(settings, frames[:2])
        await feed(settings, [intruder])
        await produce_raw(settings, "ingest", run_id.encode(), codec.encode(ingested))
        await feed(settings, frames[2:])
        return await collect(settings, lambda p: p.complete(run_id, len(expected))
                             and len(p.dead) >= 2)

    published = run(scenario())
    assert_run_as_normalized(published, path)  # neither was applied
    assert sorted((d.stage, d.error_type, d.run_key, d.topic) for d in published.dead) == sorted([
        ("resolve", "TenantMismatch", run_id, settings.topic("frames")),
        ("resolve", "TenantMismatch", run_id, settings.topic("ingest"))])
    assert all("'acme'" in d.reason and "'default'" in d.reason for d in published.dead)
    records = [codec.decode(d.record) for d in published.dead]
    assert intruder in records and ingested in records


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
        await claim_recorded(settings, object_id)
        await feed(settings, by_object + [end_of_input(by_object[-1], "run")])
        return await collect(settings, lambda p: p.complete(run_id, len(expected)))

    published = run(scenario())
    by_seq = published.deduped(run_id)
    assert [by_seq[s] for s in range(len(expected))] == expected
    assert published.runs[run_id].status == "completed"
    assert object_id not in published.runs and object_id not in published.events
    assert published.runs[run_id].provider_object_ids == [object_id]


async def _feed_and_collect(settings: PipelineSettings, frames: list[ProviderFrame], run_id: str,
                            count: int) -> Published:
    await feed(settings, frames, duplicate=0.2, seed=11)
    return await collect(settings, lambda p: p.complete(run_id, count) and bool(p.dead))


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
        changelog = changelog_topics(settings)["run"]
        await _tombstone(settings, changelog, run_id)
        # The stream delivered again after its state was released (as a late redelivery would
        # be): the run starts afresh, and its new state reaches the changelog after the
        # tombstone (the timer's deletion and the batches' values are chained in one order), so
        # a worker recovering the table gets the new state, not nothing.
        await feed(settings, frames)
        deadline = time.monotonic() + HANG_GUARD_S / 2
        while time.monotonic() < deadline:
            values = [record.raw async for record in clients.read_records(
                settings, changelog, run_id=run_id, timeout=0.5, to_end=True)]
            # (With a 1 s retention the new state may be released again later: another
            # tombstone after it.)
            if any(value is not None for value in values[values.index(None) + 1:]):
                break
            await asyncio.sleep(0.5)
        else:
            raise AssertionError(f"no state written for {run_id} after its tombstone: {values}")

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
        async for record in clients.read_records(settings, topic, timeout=0.5):
            if record.key == key.encode() and record.raw is None:
                return
        await asyncio.sleep(0.5)
    raise AssertionError(f"no tombstone for {key} on {topic}")
