"""What the calls records (services/gateway/calls/records.py) add to ``POST /v1/runs``, against a real
broker, beside a baseline measured in the same run:

    .venv/bin/python bench/calls_records.py [--ops 200] [--port 19897]

  claim      baseline: the run-owners claim every POST already makes (``RunOwners.claim``:
             write one record, acks=all, read it back through the view)
  call       ``CallsView.write`` of a run's call record, as ``begin_call`` does before a call is
             sent (the same pattern on the calls topic)
  key        an Idempotency-Key: its pending claim read back, then its answer read back (what a
             POST with the header adds before its 202)

Milliseconds per operation (median and p90 over ``--ops`` operations, one at a time, each view
following its topic as a gateway's does). Starts its own broker on ``--port`` (stopped at the
end) unless KAFKA_BOOTSTRAP_SERVERS is set.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from broker import bench_topics

from modelevents.services.gateway.calls.records import CallRecord, CallsView, now_ms
from modelevents.services.gateway.events.owners import RunOwners
from modelevents.services.kafka.clients import start_producer
from modelevents.services.kafka.settings import PipelineSettings

TIMEOUT_S = 30.0


def figures(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"median {statistics.median(ms):6.2f} ms  p90 {ms[int(len(ms) * 0.9)]:6.2f} ms"


async def timed(ops: int, one: Callable[[int], Awaitable[Any]]) -> list[float]:
    out = []
    for i in range(ops):
        start = time.perf_counter()
        assert await one(i)
        out.append(time.perf_counter() - start)
    return out


async def bench(settings: PipelineSettings, ops: int) -> None:
    producer = await start_producer(settings)
    owners, calls = RunOwners(settings), CallsView(settings)
    for view in (owners, calls):
        await view.start()
        await view.caught_up.wait()

    def publisher(topic: str) -> Callable[..., Awaitable[Any]]:
        async def publish(key: Any, value: bytes) -> Any:
            key = key.encode() if isinstance(key, str) else key
            return await producer.send_and_wait(settings.topic(topic), key=key, value=value)
        return publish

    tag = uuid.uuid4().hex[:8]

    async def claim(i: int) -> bool:
        return await owners.claim(f"run_{tag}_{i}", "acme", publisher("run-owners"),
                                  TIMEOUT_S) == "acme"

    async def call(i: int) -> bool:
        record = CallRecord(run_id=f"run_{tag}_{i}", tenant="acme", rev=1, call="c0-00000000",
                            instance="gw-0", incarnation="i", provider="openai",
                            api="openai-responses", model="gpt-5", background=True,
                            stream=False, updated_at=now_ms())
        return bool(await calls.write(record, publisher("calls"), TIMEOUT_S))

    async def key(i: int) -> bool:
        claimed = await calls.claim_key("acme", f"key-{tag}-{i}", "d", publisher("calls"),
                                        TIMEOUT_S)
        assert claimed is not None and claimed[1]
        answered = CallsView.answered(claimed[0], {"run_id": f"run_{tag}_{i}"})
        written = await publisher("calls")(answered.record_key(), answered.encode())
        return await calls.wait_read(written.partition, written.offset, TIMEOUT_S)

    try:
        await timed(20, lambda i: claim(-1 - i))  # warm the connections up
        baseline, call_writes, keys = (await timed(ops, claim), await timed(ops, call),
                                       await timed(ops, key))
    finally:
        for view in (owners, calls):
            await view.stop()
        await producer.stop()
    print(f"claim (baseline)  {figures(baseline)}")
    print(f"call              {figures(call_writes)}")
    print(f"key               {figures(keys)}")
    base = statistics.median(baseline)
    print(f"ratio (median / claim): call {statistics.median(call_writes) / base:.2f}x, key "
          f"{statistics.median(keys) / base:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--port", type=int, default=19897)
    args = parser.parse_args()
    with bench_topics(args.port, "calls-records") as settings:
        asyncio.run(bench(settings, args.ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
