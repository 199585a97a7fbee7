"""What reading a run's input packet costs ``GET /v1/runs/{id}/messages``, against a real broker,
each figure beside a baseline measured in the same run:

    .venv/bin/python bench/input_packets.py [--runs 200] [--reads 30] [--port 19895]

  latest     latest_packet (services/gateway/inputs/packets.py) as /messages calls it: a fresh
             consumer on the run's partition, read from its start to its end, pieces joined
  baseline   the same packet's records joined and decoded in memory (no broker)
  latest-big the same for a packet of ~2.5 MB (4 pieces)

Milliseconds per read (median and p90 over ``--reads`` reads of runs picked among ``--runs``,
each run's partition holding its own and other runs' packets, as on a busy topic). Starts its
own broker on ``--port`` (stopped at the end) unless KAFKA_BOOTSTRAP_SERVERS is set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid

from broker import bench_broker

from modelevents.schemas.run_input import RedactionPolicy, RunInput, request_fingerprint
from modelevents.schemas.run_input_pieces import PacketAssembler, packet_records
from modelevents.services.gateway.inputs.packets import latest_packet
from modelevents.services.kafka import topics
from modelevents.services.kafka.clients import partition_for_key, run_key_bytes, start_producer
from modelevents.services.kafka.settings import PipelineSettings


def packet(run_id: str, text: str, revision: int) -> RunInput:
    request = json.dumps({"transcript": [{"role": "user", "parts": [
        {"type": "text", "text": text}]}]}, sort_keys=True, separators=(",", ":"))
    return RunInput(run_id=run_id, tenant="default", origin="gateway", call="c0-1a2b3c4d",
                    revision=revision, recorded_at=int(time.time() * 1000), request=request,
                    fingerprint=request_fingerprint(request), adapter="openai_responses@4",
                    provider="openai", api="openai-responses", model="gpt-4.1",
                    redaction=RedactionPolicy("default", ["api_key"], [], "0" * 64, 0))


async def write(settings: PipelineSettings, packets: list[RunInput]) -> None:
    producer = await start_producer(settings)
    topic = settings.topic("run-inputs")
    try:
        partitions = sorted(await producer.partitions_for(topic))
        futures = []
        for p in packets:
            where = partitions[partition_for_key(run_key_bytes(p.run_id), len(partitions))]
            for key, value in packet_records(p):
                futures.append(await producer.send(topic, key=key.encode(), value=value,
                                                   partition=where))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def figures(times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    return f"median {statistics.median(ms):8.2f} ms   p90 {ms[int(len(ms) * 0.9)]:8.2f} ms"


async def bench(settings: PipelineSettings, runs: int, reads: int) -> None:
    rng = random.Random(7)
    small = [f"run_bench_{uuid.uuid4().hex[:12]}" for _ in range(runs)]
    big_id = f"run_big_{uuid.uuid4().hex[:12]}"
    hello = "Hello, what is the weather in Paris today? " * 20
    big_text = " ".join(f"word{rng.randrange(10**6)}" for _ in range(250_000))
    written = [packet(r, hello, rev) for r in small for rev in (0, 1)]
    big = [packet(big_id, big_text, rev) for rev in (0, 1)]
    await write(settings, written + big)

    async def timed(run_id: str) -> float:
        start = time.perf_counter()
        got = await latest_packet(settings, run_id, "default")
        elapsed = time.perf_counter() - start
        assert got is not None and got.revision == 1, run_id
        return elapsed

    picked = [rng.choice(small) for _ in range(reads)]
    await timed(picked[0])  # the first connection warms the broker's metadata
    latest = [await timed(r) for r in picked]
    records = {p.run_id: [v for _k, v in packet_records(p)] for p in written + big}

    def in_memory(run_id: str) -> float:
        start = time.perf_counter()
        assembler = PacketAssembler()
        for value in records[run_id] * 2:
            assembler.feed(value)
        assert assembler.latest(run_id) is not None
        return time.perf_counter() - start

    baseline = [in_memory(r) for r in picked]
    latest_big = [await timed(big_id) for _ in range(max(5, reads // 5))]
    baseline_big = [in_memory(big_id) for _ in range(max(5, reads // 5))]
    print(f"latest      {figures(latest)}")
    print(f"baseline    {figures(baseline)}")
    print(f"latest-big  {figures(latest_big)}")
    print(f"baseline    {figures(baseline_big)}")
    print(f"ratio (median latest / in-memory): small "
          f"{statistics.median(latest) / statistics.median(baseline):,.0f}x, big "
          f"{statistics.median(latest_big) / statistics.median(baseline_big):,.1f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--reads", type=int, default=30)
    parser.add_argument("--port", type=int, default=19895)
    args = parser.parse_args()
    with bench_broker(args.port, "input-packets") as bootstrap:
        settings = PipelineSettings(bootstrap_servers=bootstrap,
                                    topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")
        asyncio.run(topics.ensure_topics(settings))
        asyncio.run(bench(settings, args.runs, args.reads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
