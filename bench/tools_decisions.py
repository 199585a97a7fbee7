"""Unknown approval decisions against a large partition: how long a waiting call of another
tenant takes to be answered once granted.

    .venv/bin/python bench/tools_decisions.py          # --events 1000000 --decisions 1000

A broker of its own (port --port), one partition per topic, no worker: the bench writes
``events`` itself, as the worker would. In order:

1. --events small events (``text.delta``, pre-encoded, produced in batches) of a run of tenant
   ``noisy`` fill the ``events`` partition; the executor's group is committed at its end.
2. The executor (``Executor.run``, the SQLite example tools) starts; a write call of tenant
   ``victim`` is proposed and asks for an approval (``approval.requested`` on ``ingest``).
3. --decisions ``approval.resolved`` of tenant ``noisy`` naming approvals that no call waits for,
   then the victim's grant, are written to ``events`` behind them.

Measured: from the first unknown decision written to the victim's ``tool.result`` on ``ingest``
(target < 1 s). The baseline is an executor that looks an unknown decision's call up by reading
the run's ``events`` partition from offset 0: the time of one such read of this partition
(``clients.read_records(..., run_id=, to_end=True)``), times --decisions, is what the victim's
call would wait behind.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition
from broker import bench_broker

from modelevents.consumers.tools.executor import Executor
from modelevents.consumers.tools.policy import Policy
from modelevents.consumers.tools.sqlite_tools import make_registry
from modelevents.schemas import codec
from modelevents.schemas.events import Envelope, EventSource, ModelEvent, Text, ToolCall
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import ensure_topics
from modelevents.services.run_logic.executor_events import approval_resolution, new_approval_id

COMMAND = ".venv/bin/python bench/tools_decisions.py"
GROUP = "bench-tools-decisions"
NOISY, VICTIM = "noisy", "victim"


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def event(run_id: str, tenant: str, kind: str, payload: object, seq: int) -> ModelEvent:
    return ModelEvent(
        event_id=f"bench-{run_id}-{seq}", run_id=run_id, tenant=tenant, provider="openai",
        api="openai-responses", model="gpt-bench", kind=kind,
        source=EventSource(frame_id=f"bench-{seq}", index=0, transport="sse"),
        received_at=int(time.time() * 1000), adapter="bench/1",
        envelope=Envelope(content_type="application/json", body=b"{}"), payload=payload, seq=seq)


async def fill(settings: PipelineSettings, run_id: str, count: int) -> None:
    """``count`` small events of ``run_id`` on partition 0 of ``events``, in batches."""
    topic = clients.topic_name(settings, "events")
    key = clients.run_key_bytes(run_id)
    value = codec.encode(event(run_id, NOISY, "text.delta", Text(0, 0, "x"), 0))
    producer = await clients.start_producer(settings, max_batch_size=1 << 20)
    try:
        written, in_flight = 0, []
        while written < count:
            batch = producer.create_batch()
            while written < count and batch.append(key=key, value=value, timestamp=None):
                written += 1
            in_flight.append(await producer.send_batch(batch, topic, partition=0))
            if len(in_flight) >= 8:
                await asyncio.gather(*in_flight)
                in_flight.clear()
        await asyncio.gather(*in_flight)
    finally:
        await producer.stop()


async def commit_at_end(settings: PipelineSettings) -> None:
    """The executor's group starts behind what the bench filled in (as a running one would)."""
    tp = TopicPartition(clients.topic_name(settings, "events"), 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap_servers, group_id=GROUP,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        await consumer.commit({tp: end})
    finally:
        await consumer.stop()


async def write(settings: PipelineSettings, events: list[ModelEvent]) -> None:
    producer = await clients.start_producer(settings)
    try:
        await clients.await_acks(settings, [
            await clients.send_record(producer, settings, "events", e.run_id, e)
            for e in events])
    finally:
        await producer.stop()


async def first_on_ingest(settings: PipelineSettings, run_id: str, kind: str) -> ModelEvent:
    async for record in clients.read_records(settings, "ingest", run_id=run_id, timeout=120,
                                             poll_ms=10, until=lambda v: v.kind == kind):
        if record is not None and isinstance(record.value, ModelEvent) \
                and record.value.kind == kind:
            return record.value
    raise AssertionError(f"no {kind} of {run_id} on ingest")


async def scan_once(settings: PipelineSettings, run_id: str) -> float:
    started = time.perf_counter()
    async for _ in clients.read_records(settings, "events", run_id=run_id, to_end=True,
                                        timeout=30.0):
        pass
    return time.perf_counter() - started


async def measure(settings: PipelineSettings, db: Path, events: int, decisions: int
                  ) -> tuple[float, float]:
    noisy_run, victim_run = f"run_noisy_{uuid.uuid4().hex[:6]}", f"run_v_{uuid.uuid4().hex[:6]}"
    started = time.perf_counter()
    await fill(settings, noisy_run, events)
    say(f"  {events:,} events written in {time.perf_counter() - started:.1f} s")
    await commit_at_end(settings)
    scan = await scan_once(settings, noisy_run)
    say(f"  one read of the run's partition from offset 0: {scan:.2f} s")

    policy = Policy.from_dict({"tenants": {
        NOISY: {}, VICTIM: {"scopes": {"add_note": ["notebook:team"]}}}})
    executor = Executor(make_registry(db), policy, settings, group=GROUP)
    ready = asyncio.Event()
    task = asyncio.create_task(executor.run(ready=ready.set))
    try:
        await asyncio.wait_for(ready.wait(), 60)
        asked = asyncio.create_task(first_on_ingest(settings, victim_run, "approval.requested"))
        await write(settings, [event(victim_run, VICTIM, "tool.call", ToolCall(
            0, "add_note", "c1", '{"notebook": "team", "text": "granted"}'), 0)])
        requested = await asked
        approval = requested.payload.approval_id  # type: ignore[union-attr]
        answered = asyncio.create_task(first_on_ingest(settings, victim_run, "tool.result"))
        noise = [replace(approval_resolution(noisy_run, NOISY, new_approval_id("0" * 64), True,
                                             "noisy", "", int(time.time() * 1000)), seq=n + 1)
                 for n in range(decisions)]
        grant = replace(approval_resolution(victim_run, VICTIM, approval, True, "alice", "",
                                            int(time.time() * 1000)), seq=1)
        await asyncio.sleep(0.5)  # the reader of ingest is at its end
        started = time.perf_counter()
        await write(settings, [*noise, grant])
        result = await answered
        waited = time.perf_counter() - started
        assert not result.payload.is_error, result.payload  # type: ignore[union-attr]
        assert executor.book.early_count == decisions, executor.book.early_count
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return waited, scan


async def on_broker(bootstrap: str, events: int, decisions: int) -> tuple[float, float]:
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    settings = PipelineSettings(bootstrap_servers=bootstrap, partitions=1,
                                topic_prefix=f"bench-decisions-{uuid.uuid4().hex[:6]}.")
    await ensure_topics(settings)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "tools.db"
        make_registry(db)  # creates the tables
        return await measure(settings, db, events, decisions)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--decisions", type=int, default=1000)
    parser.add_argument("--port", type=int, default=19992, help="port of the bench's own broker")
    args = parser.parse_args()
    with bench_broker(args.port, "tools-decisions") as bootstrap:
        waited, scan = asyncio.run(on_broker(bootstrap, args.events, args.decisions))
    baseline = scan * args.decisions
    print(f"{COMMAND} --events {args.events} --decisions {args.decisions}")
    print(f"  the victim's call answered {waited * 1000:.0f} ms after {args.decisions:,} unknown "
          f"decisions began (target < 1 s): {'met' if waited < 1.0 else 'NOT met'}")
    print(f"  baseline, one read of the {args.events:,}-event partition per unknown decision: "
          f"{scan:.2f} s × {args.decisions:,} ≈ {baseline:,.0f} s ({baseline / waited:,.0f}× "
          "longer)")
    return 0 if waited < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
