"""A retest trigger seen on ``events`` → its decision demoted: how long, p99 over many triggers.

    .venv/bin/python bench/decisions.py          # --triggers 300

A broker of its own (port --port), 4 partitions per topic, no worker: the bench writes ``events``
itself, as the worker would. --triggers decisions are recorded on ``decisions`` (each on its own
target model and snapshot), then ``modelevents decisions watch`` starts as users start it (a
process of its own). One trigger at a time: an event of a new run reporting another snapshot of
decision i's model is produced on ``events``; the time runs from just before the send to when
decision i's demoted revision is read back from ``decisions`` by a live consumer (target: p99 ≤
5 s). The baseline, in the same run and interleaved with it, is a plain round trip: an event that
falls under no decision produced on ``events`` and read back from ``events`` by a live consumer —
what any reaction to an event costs before the watcher does anything.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from broker import bench_broker

from modelevents.schemas.decision_record import (
    Availability,
    Decision,
    DecisionTarget,
    RetestTriggers,
    decode_decision,
    is_decision,
)
from modelevents.schemas.events import Envelope, EventSource, ModelEvent, Text
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import ensure_topics
from modelevents.services.migration.decisions import store

COMMAND = ".venv/bin/python bench/decisions.py"
TARGET_P99_S = 5.0


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def decision(i: int) -> Decision:
    now = int(time.time() * 1000)
    return Decision(
        decision_id=f"dec-bench-{i:05d}", revision=0, bundle_id=f"bnd-bench-{i}",
        bundle_name=f"bench-{i}",
        target=DecisionTarget("openai", "openai-responses", f"benchmodel-{i}",
                              f"benchmodel-{i}-20260101"),
        required_capabilities=[], availability=Availability(runs=10), evidence=[],
        eval_results=["evr-bench"], exceptions=[], owner="bench",
        triggers=RetestTriggers(model_snapshot=f"benchmodel-{i}-20260101"),
        status="current", decided_at=now, updated_at=now)


def event(run_id: str, model: str) -> ModelEvent:
    return ModelEvent(
        event_id=f"{run_id}-0", run_id=run_id, tenant="bench", provider="openai",
        api="openai-responses", model=model, kind="text.delta",
        source=EventSource(frame_id=f"{run_id}-f", index=0, transport="sse"),
        received_at=int(time.time() * 1000), adapter="openai_responses@4",
        envelope=Envelope(content_type="application/json", body=b"{}"),
        payload=Text(output_index=0, part_index=0, text="hello"), seq=0)


async def live_consumer(settings: PipelineSettings, topic: str) -> AIOKafkaConsumer:
    consumer = clients.make_consumer(settings, fetch_max_wait_ms=clients.LIVE_FETCH_MAX_WAIT_MS)
    await clients.start_client(consumer, settings)
    assigned = await clients.assign_partitions(consumer, settings, topic)
    await consumer.seek_to_end(*assigned)
    for tp in assigned:
        await consumer.position(tp)
    return consumer


async def read_until(consumer: AIOKafkaConsumer, match) -> float:
    while True:
        batches = await consumer.getmany(timeout_ms=1000)
        for messages in batches.values():
            for msg in messages:
                if match(msg):
                    return time.perf_counter()


def start_watcher(settings: PipelineSettings, log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "modelevents.services.cli", "decisions", "watch",
             "--bootstrap-servers", settings.bootstrap_servers, "--prefix",
             settings.topic_prefix],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))


async def measure(settings: PipelineSettings, triggers: int, log: Path
                  ) -> tuple[list[float], list[float]]:
    producer = await clients.start_producer(settings)
    for i in range(triggers):
        await store.publish(producer, settings, decision(i))
    watcher = start_watcher(settings, log)
    try:
        ready = f"watching {triggers} current decisions"
        deadline = time.monotonic() + 120
        while ready not in log.read_text():
            if watcher.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the watcher did not start:\n{log.read_text()[-2000:]}")
            await asyncio.sleep(0.2)
        decisions = await live_consumer(settings, "decisions")
        events = await live_consumer(settings, "events")
        demotions, round_trips = [], []
        for i in range(triggers):
            # The baseline: an event under no decision, produced and read back.
            run_id = f"run-plain-{i}"
            start = time.perf_counter()
            await clients.await_acks(settings, [await clients.send_record(
                producer, settings, "events", run_id, event(run_id, "nobody-model"))])
            key = run_id.encode()
            end = await read_until(events, lambda m, key=key: m.key == key)
            round_trips.append(end - start)
            # The trigger: another snapshot of decision i's model.
            run_id, wanted = f"run-trigger-{i}", decision(i).decision_id
            start = time.perf_counter()
            await clients.await_acks(settings, [await clients.send_record(
                producer, settings, "events", run_id, event(run_id, f"benchmodel-{i}-20260202"))])

            def demoted(msg, wanted=wanted) -> bool:
                if not is_decision(msg.value):
                    return False
                found = decode_decision(msg.value)
                return found.decision_id == wanted and found.status == "historical"

            end = await asyncio.wait_for(read_until(decisions, demoted), 60)
            demotions.append(end - start)
        await decisions.stop()
        await events.stop()
        return demotions, round_trips
    finally:
        await producer.stop()
        os.killpg(watcher.pid, signal.SIGTERM)
        watcher.wait(timeout=30)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--triggers", type=int, default=300)
    parser.add_argument("--port", type=int, default=19994, help="port of the bench's own broker")
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    with bench_broker(args.port, "decisions") as bootstrap, \
            tempfile.TemporaryDirectory() as tmp:
        settings = PipelineSettings(bootstrap_servers=bootstrap, partitions=4,
                                    topic_prefix=f"bench-dec-{uuid.uuid4().hex[:6]}.")
        asyncio.run(ensure_topics(settings))
        say(f"{args.triggers} decisions, one trigger each")
        demotions, trips = asyncio.run(measure(settings, args.triggers, Path(tmp) / "watch.log"))
    d99, b99 = p99(demotions), p99(trips)
    print(f"{COMMAND} --triggers {args.triggers}")
    print(f"  trigger on events → demotion read back: median {statistics.median(demotions) * 1000:.0f}"
          f" ms, p99 {d99 * 1000:.0f} ms, max {max(demotions) * 1000:.0f} ms (target p99 ≤ "
          f"{TARGET_P99_S:.0f} s): {'met' if d99 <= TARGET_P99_S else 'NOT met'}")
    print(f"  baseline, produce → consume round trip on events: median "
          f"{statistics.median(trips) * 1000:.0f} ms, p99 {b99 * 1000:.0f} ms; demotion p99 = "
          f"{d99 / b99:.1f}× the round trip's")
    return 0 if d99 <= TARGET_P99_S else 1


if __name__ == "__main__":
    sys.exit(main())
