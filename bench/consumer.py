"""The consumer API's events/s against a raw aiokafka consumer reading the same topic, in one run.

    .venv/bin/python bench/consumer.py            # --events 200000 --rounds 3 --partitions 4

A broker of its own (port --port), one ``events`` topic filled once with ``--events`` ModelEvents
(the project's own fixtures normalized, every copy under its own run id, seq from 0 — what the
pipeline writes), then, alternately ``--rounds`` times, each reading the whole topic from the
beginning in a fresh consumer group:

- (a) raw aiokafka: ``getmany`` over the subscribed topic, bytes only — the transport's limit;
- (b) raw aiokafka + ``codec.decode`` of every value — the least a reader of typed events does;
- (c) ``modelevents.consumers.subscribe(group=…).consume(handler)`` with a handler that reads
  what a router uses (``kind``, ``run_id``, ``seq``): the header projection, dedupe by
  ``(run_id, seq)``, piece assembly, filters' checks, process-then-commit offsets (every second
  and at the end);
- (d) the same with a handler that reads every event's ``payload`` too (which decodes the rest
  of each event: ``schemas/lazy_event.py``);
- (e) ``consume(handler, batch=True)``: (c)'s handler run over each list of events handed over;
- (f) ``async for event in subscribe(…)`` with (c)'s handler in the loop body.

Each is timed from the first record to the last (the group join before it and the group's close
after it excluded, the same for all), in wall time and in this process's CPU time (which the
machine's other load moves least); medians of the rounds are printed as a Markdown table.
Target: (c) ≥ 50% of (a) (the issue's; 60% the aim since).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import itertools
import logging
import statistics
import sys
import time
from pathlib import Path

from broker import bench_broker

from modelevents.adapters.registry import normalize_bytes
from modelevents.consumers import subscribe
from modelevents.schemas import codec
from modelevents.schemas.events import ModelEvent
from modelevents.services.kafka.clients import (
    await_acks,
    make_consumer,
    send_record,
    start_client,
    start_producer,
)
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import ensure_topics

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
COMMAND = ".venv/bin/python bench/consumer.py"


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def workload(count: int) -> list[ModelEvent]:
    """``count`` events of distinct runs copied from the fixtures."""
    runs = []
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and "simulator" not in path.parts:
            try:
                events = normalize_bytes(path.read_bytes()).events
            except Exception:
                continue
            if events:
                runs.append(events)
    out: list[ModelEvent] = []
    for copy in itertools.count():
        if len(out) >= count:
            return out[:count]
        out += [dataclasses.replace(e, run_id=f"bench-{copy}-{e.run_id}")
                for e in runs[copy % len(runs)]]
    raise AssertionError("unreachable")


async def fill(settings: PipelineSettings, events: list[ModelEvent]) -> None:
    producer = await start_producer(settings)
    try:
        await await_acks(settings, [await send_record(producer, settings, "events", e.run_id, e)
                                    for e in events])
    finally:
        await producer.stop()


class Clock:
    """Wall and CPU time (this process's: aiokafka's fetches and the reader, not the broker) from
    the first record on: on this shared machine the CPU time moves least with the load."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def start(self) -> None:
        if not self.wall:
            self.wall, self.cpu = time.perf_counter(), time.process_time()

    def rates(self, count: int) -> tuple[float, float]:
        """(events per second, events per CPU second)."""
        return (count / (time.perf_counter() - self.wall),
                count / (time.process_time() - self.cpu))


async def raw(settings: PipelineSettings, group: str, count: int, decode: bool
              ) -> tuple[float, float]:
    consumer = make_consumer(settings, "events", group_id=group,
                             max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
    await start_client(consumer, settings)
    try:
        seen = 0
        clock = Clock()
        decoder = codec.decode
        while seen < count:
            batches = await consumer.getmany(timeout_ms=200, max_records=5000)
            if batches:
                clock.start()
            for messages in batches.values():
                if decode:
                    for msg in messages:
                        decoder(msg.value)
                seen += len(messages)
        return clock.rates(count)
    finally:
        await consumer.stop()


async def ours(settings: PipelineSettings, group: str, count: int, reader: str
               ) -> tuple[float, float]:
    """(c)/(d)/(e): ``consume`` with a handler; (f): an ``async for`` loop."""
    seen = 0
    clock = Clock()
    rates = (0.0, 0.0)
    routed: dict[str, int] = {}
    payload = reader == "d"

    def route(event: ModelEvent) -> None:
        # What a router reads to hand the event on; (d) reads its payload as well.
        nonlocal seen, rates
        if seen == 0:
            clock.start()
        if event.kind != "unknown" and event.seq > routed.get(event.run_id, -1):
            routed[event.run_id] = event.seq
        if payload and event.payload is None:
            raise AssertionError(f"{event.event_id} has no payload")
        seen += 1
        if seen == count:
            rates = clock.rates(count)  # at the last event: closing the group is not reading
            raise Done

    def route_batch(batch: list[ModelEvent]) -> None:
        for event in batch:
            route(event)

    sub = subscribe("events", settings=settings, group=group)
    try:
        if reader == "f":
            async with sub as events:
                async for event in events:
                    route(event)
        else:
            await sub.consume(route_batch if reader == "e" else route, batch=reader == "e")
    except Done:
        pass
    if sub.stats.duplicates or sub.stats.undecodable:
        raise AssertionError(f"unexpected: {sub.stats}")
    return rates


class Done(Exception):
    """The last event of the topic was handled (what ends a consume in the bench)."""


READERS = {
    "a": "(a) raw aiokafka consumer, bytes only",
    "b": "(b) raw aiokafka + `codec.decode`",
    "c": "(c) `subscribe(…).consume(handler)`, the handler reads kind, run_id, seq",
    "d": "(d) `consume(handler)`, the handler reads every payload too",
    "e": "(e) `consume(handler, batch=True)`, (c)'s handler over each list",
    "f": "(f) `async for event in subscribe(…)`, (c)'s handler in the loop",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--port", type=int, default=19970, help="port of the bench's own broker")
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    results: dict[str, list[tuple[float, float]]] = {k: [] for k in READERS}
    with bench_broker(args.port, "consumer") as bootstrap:
        settings = PipelineSettings(bootstrap_servers=bootstrap,
                                    topic_prefix="bench-consumer.", partitions=args.partitions)
        asyncio.run(ensure_topics(settings))
        records = workload(args.events)
        size = sum(len(codec.encode(e)) for e in records)
        say(f"workload: {len(records):,} events ({size / len(records):.0f} B each on average), "
            f"{args.partitions} partitions")
        asyncio.run(fill(settings, records))
        count = len(records)
        # The workload's 100,000s of objects would stay alive through every round, and each of
        # the readers' garbage collections would walk them: what it measures is the readers.
        del records
        gc.collect()
        for r in range(args.rounds):
            results["a"].append(asyncio.run(raw(settings, f"a{r}", count, decode=False)))
            results["b"].append(asyncio.run(raw(settings, f"b{r}", count, decode=True)))
            for k in "cdef":
                results[k].append(asyncio.run(ours(settings, f"{k}{r}", count, k)))
            say(f"round {r + 1}: " + "  ".join(
                f"({k}) {v[-1][0]:,.0f}/s {v[-1][1]:,.0f}/CPU s" for k, v in results.items()))
    wall = {k: statistics.median(v[0] for v in results[k]) for k in READERS}
    cpu = {k: statistics.median(v[1] for v in results[k]) for k in READERS}
    print(f"`{COMMAND} --events {args.events} --rounds {args.rounds} --partitions "
          f"{args.partitions}`\n")
    print("| reader, the same topic, median of rounds | events/s | vs (a) | events per CPU s "
          "| vs (a) |")
    print("|---|---:|---:|---:|---:|")
    for k, name in READERS.items():
        print(f"| {name} | {wall[k]:,.0f} | {wall[k] / wall['a']:.0%} | {cpu[k]:,.0f} | "
              f"{cpu[k] / cpu['a']:.0%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
