"""The tool executor's overhead per call over the tool's own time, and calls/s sustained.

    .venv/bin/python bench/tools.py            # --calls 2000 --rounds 3 --runs 200

A broker of its own (port --port), the pipeline's topics, and the SQLite example tool
``get_weather`` (consumers/tools/sqlite_tools.py). Each round, in the same process:

- (a) the tool alone: ``contract.run`` called as the executor calls it (in a thread), --calls
  times — the baseline;
- (b) the executor: ``Executor.handle(tool.call)`` for --calls distinct calls — argument
  validation, the policy check, the ``started`` receipt acknowledged (acks=all), the tool, the
  output shaped, the ``finished`` receipt acknowledged and the ``tool.result`` acknowledged on
  ingest. The tool's own time inside each call is measured by a wrapper around it.

- (a') the tool alone in --max-concurrent threads at once, --calls times: calls/s — what the
  tool itself sustains concurrently (the example writes its invocation log row to its SQLite
  database, in WAL mode, on every call), the ceiling of (c);
- (c) the executor as it runs: ``Executor.run`` with its lanes (consumers/tools/dispatch.py,
  ``--max-concurrent``), over --calls tool.call events of --runs runs of 8 tenants written to
  ``events`` first, as the worker writes them — read, scheduled, handled concurrently, committed.

Overhead per call = the time of ``handle`` for the call − the tool's time inside it; p50 and
p99 over all rounds, and as a ratio over (a)'s median. Target: p99 ≤ 20 ms. Calls/s: (b) calls
over its wall time (one call after the other: the sequential baseline); (c) calls from the first
call's start to the last one's end, and its ratios over (b) and over (a') in the same round.
Target for (c): ≥ 1,000 calls/s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import logging
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from broker import bench_broker

from modelevents.consumers.tools.dispatch import DEFAULT_MAX_CONCURRENT
from modelevents.consumers.tools.executor import Executor
from modelevents.consumers.tools.policy import Policy
from modelevents.consumers.tools.registry import ToolRegistry
from modelevents.consumers.tools.sqlite_tools import make_registry
from modelevents.schemas.events import Envelope, EventSource, ModelEvent, ToolCall
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import ensure_topics

COMMAND = ".venv/bin/python bench/tools.py"


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


TENANTS = [f"bench{t}" for t in range(8)]
# The tool's time inside the call being handled (the tool runs in a thread, in a copy of the
# handling task's context: the list is the same).
_tool_time: contextvars.ContextVar[list[float]] = contextvars.ContextVar("tool_time")


def call_event(run_id: str, n: int, tenant: str = "bench") -> ModelEvent:
    return ModelEvent(
        event_id=f"bench-{run_id}-{n}", run_id=run_id, tenant=tenant, provider="openai",
        api="openai-responses", model="gpt-bench", kind="tool.call",
        source=EventSource(frame_id=f"bench-{n}", index=0, transport="sse"),
        received_at=int(time.time() * 1000), adapter="bench/1",
        envelope=Envelope(content_type="application/json", body=b"{}"),
        payload=ToolCall(0, "get_weather", f"call_{n}", '{"city": "Paris"}'), seq=n)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed_registry(db: Path) -> tuple[ToolRegistry, Any]:
    """The registry of ``get_weather`` wrapped to measure the tool, and the tool itself."""
    contract = make_registry(db).get("get_weather")
    assert contract is not None

    def timed(arguments: dict[str, Any], context: Any) -> Any:
        started = time.perf_counter()
        try:
            return contract.run(arguments, context)
        finally:
            _tool_time.get().append(time.perf_counter() - started)

    return ToolRegistry([replace(contract, run=timed)]), contract


async def one_round(settings: PipelineSettings, db: Path, calls: int
                    ) -> tuple[list[float], list[float], float]:
    registry, contract = timed_registry(db)
    executor = Executor(registry, Policy.from_dict({"tenants": {"bench": {}}}), settings)
    await executor.start()
    try:
        baseline = []
        for n in range(calls):
            started = time.perf_counter()
            await asyncio.to_thread(contract.run, {"city": "Paris"}, _Context(n))
            baseline.append(time.perf_counter() - started)
        run_id = f"run_{uuid.uuid4().hex[:10]}"
        events = [call_event(run_id, n) for n in range(calls)]
        overhead = []
        wall = time.perf_counter()
        for event in events:
            tool_times: list[float] = []
            _tool_time.set(tool_times)
            started = time.perf_counter()
            await executor.handle(event)
            overhead.append(time.perf_counter() - started - sum(tool_times))
        wall = time.perf_counter() - wall
        assert executor.executed == calls, executor.executed
    finally:
        await executor.stop()
    return baseline, overhead, calls / wall


async def concurrent_round(settings: PipelineSettings, db: Path, calls: int, runs: int,
                           max_concurrent: int) -> tuple[list[float], list[float], float, int]:
    """(c): overheads, the tool's times, calls/s, and the most calls handled at once. Topics of
    its own: the executor's new group reads ``events`` from the start."""
    settings = replace(settings, topic_prefix=f"bench-tools-{uuid.uuid4().hex[:6]}.")
    await ensure_topics(settings)
    registry, _ = timed_registry(db)
    policy = Policy.from_dict({"tenants": {t: {} for t in TENANTS}})
    executor = Executor(registry, policy, settings, group=f"bench-{uuid.uuid4().hex[:8]}",
                        max_concurrent_calls=max_concurrent)
    run_ids = [f"run_{uuid.uuid4().hex[:10]}" for _ in range(runs)]
    producer = await clients.start_producer(settings)
    try:  # call n of the round goes to run n % runs: the runs' calls interleave on the topic
        await clients.await_acks(settings, [
            await clients.send_record(producer, settings, "events", run_ids[n % runs],
                                      call_event(run_ids[n % runs], n // runs,
                                                 TENANTS[n % runs % len(TENANTS)]))
            for n in range(calls)])
    finally:
        await producer.stop()
    overhead: list[float] = []
    tools: list[float] = []
    spans: list[tuple[float, float]] = []
    handle = executor.handle
    all_done = asyncio.Event()

    async def timed_handle(event: ModelEvent) -> None:
        tool_times: list[float] = []
        _tool_time.set(tool_times)
        started = time.perf_counter()
        await handle(event)
        ended = time.perf_counter()
        overhead.append(ended - started - sum(tool_times))
        tools.extend(tool_times)
        spans.append((started, ended))
        if len(spans) == calls:
            all_done.set()

    executor.handle = timed_handle
    running = asyncio.ensure_future(executor.run())
    cpu = time.process_time()
    try:
        await asyncio.wait_for(all_done.wait(), 600)
        cpu = time.process_time() - cpu
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert executor.executed == calls, executor.executed
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    peak = executor.lanes.peak if executor.lanes is not None else 0
    say(f"  (c) process CPU {cpu / calls * 1000:.2f} ms per call")
    return overhead, tools, calls / wall, peak


def tool_alone_concurrently(db: Path, calls: int, threads: int) -> float:
    """(a'): calls/s of the tool alone in ``threads`` threads at once."""
    contract = make_registry(db).get("get_weather")
    assert contract is not None
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda n: contract.run({"city": "Paris"}, _Context(n)), range(calls)))
    return calls / (time.perf_counter() - started)


class _Context:
    def __init__(self, n: int) -> None:
        self.idempotency_key = f"baseline-{n}"
        self.attempt = 1
        self.operation_id = f"op-baseline-{n}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=200, help="(c): runs the calls are spread over")
    parser.add_argument("--max-concurrent", type=int, default=DEFAULT_MAX_CONCURRENT,
                        help="(c): calls handled at once (tools.max_concurrent_calls)")
    parser.add_argument("--port", type=int, default=19990, help="port of the bench's own broker")
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    baseline: list[float] = []
    overhead: list[float] = []
    rates: list[float] = []
    concurrent: list[float] = []
    concurrent_rates: list[float] = []
    peaks: list[int] = []
    ceilings: list[float] = []
    with bench_broker(args.port, "tools") as bootstrap, \
            tempfile.TemporaryDirectory() as tmp:
        settings = PipelineSettings(bootstrap_servers=bootstrap,
                                    topic_prefix=f"bench-tools-{uuid.uuid4().hex[:6]}.",
                                    partitions=1)
        asyncio.run(ensure_topics(settings))
        db = Path(tmp) / "tools.db"
        make_registry(db)
        with sqlite3.connect(db) as conn:
            conn.execute("INSERT INTO weather VALUES ('Paris', 14.0, 'cloudy')")
        for r in range(args.rounds):
            b, o, rate = asyncio.run(one_round(settings, db, args.calls))
            baseline += b
            overhead += o
            rates.append(rate)
            say(f"round {r + 1}: tool p50 {statistics.median(b) * 1000:.2f} ms, overhead p50 "
                f"{statistics.median(o) * 1000:.2f} ms p99 {percentile(o, 0.99) * 1000:.2f} ms, "
                f"{rate:,.0f} calls/s")
            ceilings.append(tool_alone_concurrently(db, args.calls, args.max_concurrent))
            c, c_tool, c_rate, peak = asyncio.run(concurrent_round(settings, db, args.calls, args.runs,
                                                           args.max_concurrent))
            concurrent += c
            concurrent_rates.append(c_rate)
            peaks.append(peak)
            say(f"round {r + 1} concurrent: tool p50 {statistics.median(c_tool) * 1000:.2f} ms, "
                f"overhead p50 {statistics.median(c) * 1000:.2f} ms "
                f"p99 {percentile(c, 0.99) * 1000:.2f} ms, {c_rate:,.0f} calls/s "
                f"({c_rate / rate:.1f}× sequential; the tool alone {ceilings[-1]:,.0f}/s in "
                f"{args.max_concurrent} threads), at most {peak} at once")
    tool_p50 = statistics.median(baseline)
    print(f"`{COMMAND} --calls {args.calls} --rounds {args.rounds} --runs {args.runs} "
          f"--max-concurrent {args.max_concurrent}`\n")
    print("| | p50 | p99 | × the tool's p50 |")
    print("|---|---|---|---|")
    print(f"| (a) the tool alone | {tool_p50 * 1000:.2f} ms | "
          f"{percentile(baseline, 0.99) * 1000:.2f} ms | 1.0 |")
    o50, o99 = statistics.median(overhead), percentile(overhead, 0.99)
    print(f"| (b) executor overhead per call | {o50 * 1000:.2f} ms | {o99 * 1000:.2f} ms | "
          f"{o50 / tool_p50:.1f} (p50), {o99 / tool_p50:.1f} (p99) |")
    c50, c99 = statistics.median(concurrent), percentile(concurrent, 0.99)
    print(f"| (c) executor overhead per call, {args.runs} runs at once (≤ "
          f"{args.max_concurrent}) | {c50 * 1000:.2f} ms | {c99 * 1000:.2f} ms | "
          f"{c50 / tool_p50:.1f} (p50), {c99 / tool_p50:.1f} (p99) |")
    ratios = [c / s for c, s in zip(concurrent_rates, rates, strict=True)]
    of_ceiling = [c / t for c, t in zip(concurrent_rates, ceilings, strict=True)]
    print(f"\ncalls/s sustained, (b) one call after another (the sequential baseline): median "
          f"{statistics.median(rates):,.0f} (rounds: {', '.join(f'{r:,.0f}' for r in rates)}); "
          f"(c) concurrent: median {statistics.median(concurrent_rates):,.0f} (rounds: "
          f"{', '.join(f'{r:,.0f}' for r in concurrent_rates)}), "
          f"{statistics.median(ratios):.1f}× (b) in the same round; at most {max(peaks)} "
          f"calls at once; (a') the tool alone in {args.max_concurrent} threads: median "
          f"{statistics.median(ceilings):,.0f}/s, (c) is {statistics.median(of_ceiling):.2f}× it")
    print(f"targets: p99 ≤ 20 ms (b) {'met' if o99 <= 0.020 else 'NOT met'}, (c) "
          f"{'met' if c99 <= 0.020 else 'NOT met'}; (c) ≥ 1,000 calls/s "
          f"{'met' if statistics.median(concurrent_rates) >= 1000 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
