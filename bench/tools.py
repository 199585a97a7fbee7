"""The tool executor's overhead per call over the tool's own time, and calls/s sustained.

    .venv/bin/python bench/tools.py            # --calls 2000 --rounds 3

A broker of its own (port --port), the pipeline's topics, and the SQLite example tool
``get_weather`` (consumers/tools/sqlite_tools.py). Each round, in the same process:

- (a) the tool alone: ``contract.run`` called as the executor calls it (in a thread), --calls
  times — the baseline;
- (b) the executor: ``Executor.handle(tool.call)`` for --calls distinct calls — argument
  validation, the policy check, the ``started`` receipt acknowledged (acks=all), the tool, the
  output shaped, the ``finished`` receipt acknowledged and the ``tool.result`` acknowledged on
  ingest. The tool's own time inside each call is measured by a wrapper around it.

Overhead per call = (b)'s time for the call − the tool's time inside it; p50 and p99 over all
rounds, and as a ratio over (a)'s median. Target: p99 ≤ 20 ms. Calls/s: (b) calls over its wall
time (one executor, calls one after the other, as one partition's calls are handled).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from broker import bench_broker

from modelevents.consumers.tools.executor import Executor
from modelevents.consumers.tools.policy import Policy
from modelevents.consumers.tools.registry import ToolRegistry
from modelevents.consumers.tools.sqlite_tools import make_registry
from modelevents.schemas.events import Envelope, EventSource, ModelEvent, ToolCall
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import ensure_topics

COMMAND = ".venv/bin/python bench/tools.py"


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def call_event(run_id: str, n: int) -> ModelEvent:
    return ModelEvent(
        event_id=f"bench-{run_id}-{n}", run_id=run_id, tenant="bench", provider="openai",
        api="openai-responses", model="gpt-bench", kind="tool.call",
        source=EventSource(frame_id=f"bench-{n}", index=0, transport="sse"),
        received_at=int(time.time() * 1000), adapter="bench/1",
        envelope=Envelope(content_type="application/json", body=b"{}"),
        payload=ToolCall(0, "get_weather", f"call_{n}", '{"city": "Paris"}'), seq=n)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def one_round(settings: PipelineSettings, db: Path, calls: int
                    ) -> tuple[list[float], list[float], float]:
    contract = make_registry(db).get("get_weather")
    assert contract is not None
    tool_times: list[float] = []

    def timed(arguments: dict[str, Any], context: Any) -> Any:
        started = time.perf_counter()
        try:
            return contract.run(arguments, context)
        finally:
            tool_times.append(time.perf_counter() - started)

    registry = ToolRegistry([replace(contract, run=timed)])  # the wrapper measures the tool
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
            tool_times.clear()
            started = time.perf_counter()
            await executor.handle(event)
            overhead.append(time.perf_counter() - started - sum(tool_times))
        wall = time.perf_counter() - wall
        assert executor.executed == calls, executor.executed
    finally:
        await executor.stop()
    return baseline, overhead, calls / wall


class _Context:
    def __init__(self, n: int) -> None:
        self.idempotency_key = f"baseline-{n}"
        self.attempt = 1
        self.operation_id = f"op-baseline-{n}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=19990, help="port of the bench's own broker")
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    baseline: list[float] = []
    overhead: list[float] = []
    rates: list[float] = []
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
    tool_p50 = statistics.median(baseline)
    print(f"`{COMMAND} --calls {args.calls} --rounds {args.rounds}`\n")
    print("| | p50 | p99 | × the tool's p50 |")
    print("|---|---|---|---|")
    print(f"| (a) the tool alone | {tool_p50 * 1000:.2f} ms | "
          f"{percentile(baseline, 0.99) * 1000:.2f} ms | 1.0 |")
    o50, o99 = statistics.median(overhead), percentile(overhead, 0.99)
    print(f"| (b) executor overhead per call | {o50 * 1000:.2f} ms | {o99 * 1000:.2f} ms | "
          f"{o50 / tool_p50:.1f} (p50), {o99 / tool_p50:.1f} (p99) |")
    print(f"\ncalls/s sustained (one executor, one call after another): median "
          f"{statistics.median(rates):,.0f} (rounds: {', '.join(f'{r:,.0f}' for r in rates)}); "
          f"target p99 ≤ 20 ms: {'met' if o99 <= 0.020 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
