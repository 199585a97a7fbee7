"""The pipeline's figures, on a broker of its own, in one run.

    .venv/bin/python bench/pipeline.py [--frames 40000] [--rounds 5] [--rate 2000]
                                       [--latency-seconds 15] [--rss-runs 100000]

  (a) limit   a raw aiokafka consume→produce passthrough of the same frame records (consumer
              group, batches of up to 2,000, idempotent acks=all producer, commit per batch): what
              this box does with Kafka and Python and no work at all;
  (b) ours    the worker (`modelevents worker`, a subprocess) turning pre-produced frames into
              ModelEvents on `events`: sustained frames/s and events/s, from the first event to
              the last (their record timestamps; while the worker runs, only the end offsets of
              `events` are polled — no reader shares the two cores with it, as none does with
              (a) — and the events are counted by (run_id, seq) afterwards); reported as a
              ratio to (a). (a) and (b) run alternately --rounds times (each on topics of its
              own, deleted after it) and their medians are compared.
              Also the CPU time each took per record (the passthrough's process, the worker's):
              unlike the rates, it does not count what the VM's hypervisor stole;
  (c) latency frame produced → its events readable on `events`, p50/p99, at a steady offered
              load of --rate frames/s, after a warm-up (one copy of the workload through, then
              3 s of the same load); also the part up to the worker's send (the event record's
              timestamp). Measured first: after the throughput rounds the broker is still busy
              deleting and compacting their logs;
  (d) memory  the worker's RSS while it holds the state of --rss-runs small runs (default
              retention, so every run's state is still held), sampled as the runs go through.

Frames are the project's own fixtures (tests/fixtures), each copied under many run ids, with the
end-of-input markers the feeder adds. Prints a Markdown table (the one in docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from proc_stats import cpu_seconds, rss_mb  # bench/, beside this script

from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import ProviderFrame
from modelevents.services import processor
from modelevents.services.kafka.clients import make_consumer, start_client, start_producer
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import ensure_topics
from modelevents.services.local import kafka_broker
from modelevents.services.local.feeder import frames_for_file
from modelevents.services.local.worker_process import start_worker_process, stop_worker_process

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
TINY_RUN = FIXTURES / "openai-chat" / "reasoning-then-text.sse"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fixture_runs() -> list[tuple[Path, int, list[str]]]:
    """(fixture, events normalize gives for it, its provider object ids) for every own fixture."""
    runs = []
    for path in sorted(p for p in FIXTURES.rglob("*") if p.is_file()):
        try:
            events = normalize_bytes(path.read_bytes(), source_name=path.name).events
        except ModelEventsError:
            continue
        ids = {e.payload.provider_object_id for e in events
               if e.kind == "run.started" and e.payload.provider_object_id}
        runs.append((path, len(events), sorted(ids, key=len, reverse=True)))
    return runs


def unique_copy(frames: list[ProviderFrame], object_ids: list[str], copy: str,
                ) -> list[ProviderFrame]:
    """The frames with every provider object id made unique to this copy: real providers never
    reuse an id, and the processor joins frames of one object id into one run."""
    out = []
    for frame in frames:
        body = frame.body
        for object_id in object_ids:
            body = body.replace(object_id.encode(), f"{object_id}x{copy}".encode())
        out.append(replace(frame, body=body))
    return out


def make_workload(target_frames: int, tag: str) -> tuple[list[ProviderFrame], int]:
    """Copies of the fixtures under distinct run ids until ``target_frames``: (frames, events)."""
    frames: list[ProviderFrame] = []
    events = 0
    fixtures = fixture_runs()
    copy = 0
    while len(frames) < target_frames:
        for n, (path, count, object_ids) in enumerate(fixtures):
            fed = frames_for_file(path, run_id=f"{tag}-{copy}-{path.parent.name}-{path.stem}")
            # Unique per file too: the fixtures of successive polls of one provider object would
            # otherwise be separate runs claiming one object id (dead letters, not a workload).
            frames += with_end_markers(unique_copy(fed.frames, object_ids, f"{tag}{copy}f{n}"))
            events += count
        copy += 1
    return frames, events


async def produce_all(settings: PipelineSettings, topic: str, frames: list[ProviderFrame]) -> None:
    producer = await start_producer(settings)
    try:
        futures = [await producer.send(topic, key=f.run_key.encode(), value=codec.encode(f))
                   for f in frames]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


# --- (a) the raw passthrough ------------------------------------------------------------------


async def passthrough(settings: PipelineSettings, frames: list[ProviderFrame]) -> tuple[float, float]:
    """(frames/s, this process's CPU µs per frame) from its first fetched batch to the last ack."""
    src, dst = f"{settings.topic_prefix}pass-src", f"{settings.topic_prefix}pass-dst"
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    await admin.create_topics([NewTopic(t, settings.partitions, 1) for t in (src, dst)])
    await admin.close()
    await produce_all(settings, src, frames)
    consumer = make_consumer(settings, src, group_id=f"{settings.app_id}-pass",
                             max_poll_records=2000)
    await start_client(consumer, settings)
    producer = await start_producer(settings)
    moved, first = 0, None
    try:
        while moved < len(frames):
            batches = await consumer.getmany(timeout_ms=500, max_records=2000)
            if first is None and batches:
                first, cpu = time.perf_counter(), time.process_time()
            futures = [await producer.send(dst, key=m.key, value=m.value)
                       for messages in batches.values() for m in messages]
            await asyncio.gather(*futures)
            await consumer.commit()
            moved += len(futures)
        return (moved / (time.perf_counter() - first),
                (time.process_time() - cpu) / moved * 1e6)
    finally:
        await producer.stop()
        await consumer.stop()


async def drop_topics(settings: PipelineSettings) -> None:
    """Delete a phase's topics, so that the broker's log cleaner does not work on them (on the
    CPU the next phase measures with)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
    await admin.start()
    try:
        mine = [t for t in await admin.list_topics()
                if t.startswith(settings.topic_prefix) or t.startswith(f"{settings.app_id}-")]
        if mine:
            await admin.delete_topics(mine)
    finally:
        await admin.close()


# --- the worker ---------------------------------------------------------------------------------




_PROBE = "import time\nt = time.perf_counter()\nn = 0\nfor i in range(10_000_000):\n    n += i\nprint(time.perf_counter() - t)"


def speed_probe() -> float:
    """Seconds a fixed pure-Python loop takes, run on both vCPUs at once (the slower of the two):
    how fast this machine was at the time. On this VM the host takes time from it when both are
    busy, more at some hours than at others — and every figure moves with it."""
    probes = [subprocess.Popen([sys.executable, "-c", _PROBE], stdout=subprocess.PIPE, text=True)
              for _ in range(2)]
    return max(float(probe.communicate()[0]) for probe in probes)


async def prepared(settings: PipelineSettings) -> PipelineSettings:
    await ensure_topics(settings)
    await processor.prepare_topics(settings)
    return settings


# --- (b) sustained throughput -------------------------------------------------------------------


async def sustained(settings: PipelineSettings, frames: list[ProviderFrame], expected: int,
                    workdir: Path) -> tuple[float, float, float, float]:
    """(frames/s, events/s, worker CPU µs per event, worker CPU / wall) while the worker turns
    the pre-produced frames into ``expected`` events.

    Measured on the log, not by a reader racing the worker for the two cores ((a) has none
    either): while the worker runs, only the end offsets of ``events`` are polled (a request
    every 20 ms); the rate is the events over the span of their record timestamps (the worker's
    producer stamps each when it appends it: first to last event); afterwards, off the clock,
    every record is read and the events are counted by ``(run_id, seq)`` — what a consumer of
    ``events`` dedupes by — so a record written twice is not counted twice."""
    await prepared(settings)
    await produce_all(settings, settings.topic("frames"), frames)
    topic = settings.topic("events")
    watcher = make_consumer(settings)
    await start_client(watcher, settings)
    partitions = [TopicPartition(topic, p) for p in range(settings.partitions)]
    worker = start_worker_process(settings, workdir, workdir / f"{settings.app_id}.log")
    cpu = written = None
    try:
        deadline = time.monotonic() + 900
        while True:
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"worker stopped or too slow: {written or 0} records of "
                                 f"{expected} events on {topic}")
            written = sum((await watcher.end_offsets(partitions)).values())
            if written and cpu is None:
                cpu, before, since = cpu_seconds(worker.pid), written, time.perf_counter()
            if written >= expected:
                # Within 20 ms of the last record's writing: the worker's CPU time up to here.
                used, wall = cpu_seconds(worker.pid) - cpu, time.perf_counter() - since
                distinct = await _distinct_events(settings)
                if len(distinct) >= expected:
                    break
            await asyncio.sleep(0.02)
        stamps = sorted(distinct.values())
        seconds = (stamps[-1] - stamps[0]) / 1000
        return (len(frames) / seconds, expected / seconds, used / (written - before) * 1e6,
                used / wall)
    finally:
        stop_worker_process(worker)
        await watcher.stop()


async def _distinct_events(settings: PipelineSettings) -> dict[tuple[bytes, int], int]:
    """Every event on ``events`` by (run_id, seq) → its record's timestamp (the first copy's)."""
    consumer = make_consumer(settings)
    await start_client(consumer, settings)
    seen: dict[tuple[bytes, int], int] = {}
    try:
        partitions = [TopicPartition(settings.topic("events"), p) for p in range(settings.partitions)]
        ends = await consumer.end_offsets(partitions)
        consumer.assign([tp for tp, end in ends.items() if end])
        await consumer.seek_to_beginning()
        while [tp for tp, end in ends.items() if end and await consumer.position(tp) < end]:
            for messages in (await consumer.getmany(timeout_ms=500, max_records=5000)).values():
                for m in messages:
                    seen.setdefault((m.key, codec.decode(m.value).seq), m.timestamp)
    finally:
        await consumer.stop()
    return seen


# --- (c) latency at a steady offered load -------------------------------------------------------


STEADY_WARMUP_S = 3.0


async def latency(settings: PipelineSettings, rate: float, seconds: float,
                  workdir: Path) -> tuple[float, float, int, float, float]:
    await prepared(settings)
    frames, _ = make_workload(int(rate * seconds), "lat")
    frames = frames[: int(rate * seconds)]
    consumer = make_consumer(settings, "events", from_beginning=False)
    await start_client(consumer, settings)
    worker = start_worker_process(settings, workdir, workdir / f"{settings.app_id}.log")
    producer = await start_producer(settings)
    samples: list[float] = []
    worker_side: list[float] = []
    try:
        # Warm-up: one copy of the workload, every event of it through (the worker has joined
        # its group, recovered, and run every adapter once) before the clock starts. Measuring
        # from its first event instead put the rest of the warm-up, and the worker's first
        # batches, into the first second: ~150 ms latencies across every partition.
        warm, warm_events = make_workload(1, "warm")
        warm_keys = {f.run_key.encode() for f in warm}
        await asyncio.gather(*[await producer.send(settings.topic("frames"), key=f.run_key.encode(),
                                                   value=codec.encode(f)) for f in warm])
        deadline = time.monotonic() + 120
        seen_warm = 0
        while seen_warm < warm_events and time.monotonic() < deadline:
            got = await consumer.getmany(timeout_ms=500)
            seen_warm += sum(m.key in warm_keys for ms in got.values() for m in ms)
        if seen_warm < warm_events:
            raise SystemExit(f"warm-up: {seen_warm} of {warm_events} events in 120 s")

        # Then the same load as measured, for STEADY_WARMUP_S, before the measured frames: the
        # first half second of a load after the worker went idle had 100–300 ms latencies in
        # every run (seen by splitting each latency at the event record's timestamp: on the
        # worker's side), which is the start of a load, not the steady state (c) is about.
        steady, _ = make_workload(int(rate * STEADY_WARMUP_S), "steady")
        offered = steady[: int(rate * STEADY_WARMUP_S)] + frames

        async def offer() -> None:
            start = time.monotonic()
            for n, frame in enumerate(offered):
                delay = start + n / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                frame.received_at = int(time.time() * 1000)  # produced now: latency starts here
                await producer.send(settings.topic("frames"), key=frame.run_key.encode(),
                                    value=codec.encode(frame))
            await producer.flush()

        sender = asyncio.create_task(offer())
        quiet_since = None
        while True:
            got = await consumer.getmany(timeout_ms=200)
            now = time.time() * 1000
            for messages in got.values():
                for m in messages:
                    event = codec.decode(m.value)
                    if not event.run_id.startswith("lat-"):
                        continue
                    samples.append(now - event.received_at)
                    # The record's timestamp is the worker's producer's clock at send: the
                    # latency up to it is the worker's side (fetch, batch, compute).
                    worker_side.append(m.timestamp - event.received_at)
            if got:
                quiet_since = None
            elif sender.done():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > 5:
                    break
        samples.sort()
        worker_side.sort()
        p99 = lambda values: values[int(0.99 * (len(values) - 1))]  # noqa: E731
        return (statistics.median(samples), p99(samples), len(samples),
                statistics.median(worker_side), p99(worker_side))
    finally:
        stop_worker_process(worker)
        await producer.stop()
        await consumer.stop()


# --- (d) memory with many runs ------------------------------------------------------------------


async def memory(settings: PipelineSettings, runs: int, workdir: Path) -> list[tuple[int, float]]:
    await prepared(settings)
    template = with_end_markers(frames_for_file(TINY_RUN, run_id="x").frames)
    events_per_run = len(normalize_bytes(TINY_RUN.read_bytes()).events)
    object_ids = next(ids for path, _, ids in fixture_runs() if path == TINY_RUN)
    worker = start_worker_process(settings, workdir, workdir / f"{settings.app_id}.log")
    consumer = make_consumer(settings, "runs")
    await start_client(consumer, settings)
    producer = await start_producer(settings)
    curve: list[tuple[int, float]] = [(0, float("nan"))]
    try:
        futures = []
        for n in range(runs):
            for frame in unique_copy(template, object_ids, str(n)):
                frame = replace(frame, run_key=f"mem-{n}")
                futures.append(await producer.send(settings.topic("frames"),
                                                   key=frame.run_key.encode(),
                                                   value=codec.encode(frame)))
            if len(futures) > 20000:
                await asyncio.gather(*futures)
                futures.clear()
        await asyncio.gather(*futures)
        say(f"  (d) {runs} runs ({runs * len(template)} frames) produced; waiting for the worker")
        finished: set[bytes] = set()
        step = max(runs // 10, 1)
        deadline = time.monotonic() + 3600
        while len(finished) < runs and time.monotonic() < deadline:
            for messages in (await consumer.getmany(timeout_ms=1000, max_records=10000)).values():
                for m in messages:
                    state = codec.decode(m.value)
                    if state.last_seq + 1 >= events_per_run:
                        finished.add(m.key)
            if len(finished) >= len(curve) * step:
                curve.append((len(finished), rss_mb(worker.pid)))
                say(f"  (d) {len(finished)} runs done, worker RSS {curve[-1][1]:.0f} MB")
        if curve[-1][0] != len(finished):
            curve.append((len(finished), rss_mb(worker.pid)))
        return curve[1:]
    finally:
        stop_worker_process(worker)
        await producer.stop()
        await consumer.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=40000, help="frames for (a) and (b)")
    parser.add_argument("--rate", type=float, default=2000.0, help="offered load for (c)")
    parser.add_argument("--latency-seconds", type=float, default=15.0, help="duration of (c)")
    parser.add_argument("--rss-runs", type=int, default=100_000, help="runs for (d); 0 skips it")
    parser.add_argument("--rounds", type=int, default=5,
                        help="(a) and (b) alternately this many times; medians are reported "
                             "(this box's figures vary by a third from one run to the next)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--port", type=int, default=19950, help="port of the bench's own broker")
    args = parser.parse_args()
    import logging

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    workdir = Path(tempfile.mkdtemp(prefix="modelevents-bench-"))
    kafka = kafka_broker.LocalBrokerSettings(port=args.port, state_root=workdir / "kafka", heap="1g")
    broker = kafka_broker.start(kafka, fresh=True, progress=lambda line: say(f"  {line}"))

    def settings(tag: str) -> PipelineSettings:
        return PipelineSettings(bootstrap_servers=broker.bootstrap_servers,
                                topic_prefix=f"bench-{tag}.", partitions=args.partitions,
                                app_id=f"bench-{tag}")

    probes = [speed_probe()]
    try:
        frames, expected = make_workload(args.frames, "thr")
        say(f"workload: {len(frames)} frames → {expected} events, {args.partitions} partitions")
        # (c) first: measured after the throughput rounds it took the broker's aftermath of
        # them (deleting and compacting their logs) — p99 300 ms instead of 50–85 ms.
        p50, p99, n, w50, w99 = asyncio.run(latency(settings("c"), args.rate, args.latency_seconds,
                                                    workdir))
        say(f"(c) latency p50 {p50:.0f} ms, p99 {p99:.0f} ms over {n} events (to the worker's "
            f"send: p50 {w50:.0f} ms, p99 {w99:.0f} ms)")
        asyncio.run(drop_topics(settings("c")))
        a_runs, b_runs = [], []
        for r in range(args.rounds):
            a_runs.append(asyncio.run(passthrough(settings(f"a{r}"), frames)))
            say(f"(a) round {r + 1}: passthrough {a_runs[-1][0]:,.0f} records/s, "
                f"{a_runs[-1][1]:.0f} µs CPU per record")
            asyncio.run(drop_topics(settings(f"a{r}")))
            b_runs.append(asyncio.run(sustained(settings(f"b{r}"), frames, expected, workdir)))
            say(f"(b) round {r + 1}: pipeline {b_runs[-1][0]:,.0f} frames/s, "
                f"{b_runs[-1][1]:,.0f} events/s; worker {b_runs[-1][2]:.0f} µs CPU per event "
                f"at {b_runs[-1][3]:.0%} of a core")
            asyncio.run(drop_topics(settings(f"b{r}")))
        a = statistics.median(run[0] for run in a_runs)
        a_cpu = statistics.median(run[1] for run in a_runs)
        b_cpu = statistics.median(run[2] for run in b_runs)
        b_busy = statistics.median(run[3] for run in b_runs)
        b_frames = statistics.median(run[0] for run in b_runs)
        b_events = b_frames * expected / len(frames)
        probes.append(speed_probe())
        curve = asyncio.run(memory(settings("d"), args.rss_runs, workdir)) if args.rss_runs else []
    except BaseException:
        say(f"the broker's and the workers' logs are kept in {workdir}")
        raise
    finally:
        if broker.started:
            kafka_broker.stop(kafka)
    shutil.rmtree(workdir, ignore_errors=True)  # ~100 MB of broker data per run
    print("| figure | value |")
    print("|---|---:|")
    print(f"| the machine's speed: a 10M-iteration Python loop on both vCPUs, before (c) / after (b) | "
          f"{probes[0]:.2f} s / {probes[1]:.2f} s |")
    spread = lambda values: f"{min(values):,.0f}–{max(values):,.0f}"  # noqa: E731
    print(f"| (a) raw aiokafka consume→produce passthrough, median of {args.rounds} "
          f"({spread([run[0] for run in a_runs])}) | {a:,.0f} frames/s |")
    print(f"| (b) pipeline, frames → `events`, median of {args.rounds} "
          f"({spread([run[0] for run in b_runs])} frames/s) | {b_frames:,.0f} frames/s = "
          f"{b_events:,.0f} ModelEvents/s (frames {b_frames / a:.0%}, "
          f"ModelEvents {b_events / a:.0%} of (a)) |")
    print(f"| CPU, medians: (a) the passthrough per frame; (b) the worker per ModelEvent, and "
          f"how busy it kept its core | (a) {a_cpu:.0f} µs; (b) {b_cpu:.0f} µs at "
          f"{b_busy:.0%} of a core |")
    print(f"| (c) latency frame → event at {args.rate:,.0f} frames/s (of it, frame → the worker's "
          f"send) | p50 {p50:.0f} ms, p99 {p99:.0f} ms ({n} events) (p50 {w50:.0f} ms, "
          f"p99 {w99:.0f} ms) |")
    for runs, mb in curve:
        print(f"| (d) worker RSS with {runs:,} runs held | {mb:,.0f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
