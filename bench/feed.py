"""Feed and read throughput against a real Kafka broker: ProviderFrames in, records out.

    .venv/bin/python bench/feed.py [--frames 100000] [--bootstrap-servers HOST:PORT] [--partitions 4]

Builds --frames ProviderFrames from the project's own fixtures (tests/fixtures; each file fed
many times under distinct run ids, as many runs at once would arrive), creates fresh topics under
a unique prefix, then measures

  feed   feeder.feed_frames: Avro encoding + idempotent producer (acks=all, the project's
         linger/batch settings), all acknowledgements awaited;
  read   clients.read_records over the whole frames topic: fetch + Avro decoding;

and deletes the topics. The broker must be running (`modelevents kafka start`, or
KAFKA_BOOTSTRAP_SERVERS). Prints frames/s and MB/s for both.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import time
import uuid
from pathlib import Path

from modelevents.schemas import codec
from modelevents.services.kafka import clients, topics
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import feeder

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def build_frames(target: int) -> list:
    files = sorted(p for p in FIXTURES.rglob("*") if p.is_file())
    base = [feeder.frames_for_file(p) for p in files]
    out = []
    copy = 0
    while len(out) < target:
        for fed in base:
            run_key = f"{fed.run_id}-{copy}"
            out.extend(dataclasses.replace(f, run_key=run_key) for f in fed.frames)
        copy += 1
    return out[:target]


async def main(args: argparse.Namespace) -> None:
    settings = dataclasses.replace(PipelineSettings(), topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.",
                                   partitions=args.partitions,
                                   **({"bootstrap_servers": args.bootstrap_servers}
                                      if args.bootstrap_servers else {}))
    frames = build_frames(args.frames)
    size = sum(len(codec.encode(f)) for f in frames)
    print(f"{len(frames)} frames, {size / 1e6:.1f} MB Avro, {len({f.run_key for f in frames})} runs, "
          f"{settings.partitions} partitions, {settings.bootstrap_servers}", file=sys.stderr)
    stats, read, read_s = await feed_and_read(settings, frames)
    print(f"feed   {stats.rate:>10,.0f} frames/s  {size / stats.seconds / 1e6:6.1f} MB/s  "
          f"({stats.sent} in {stats.seconds:.2f} s)")
    print(f"read   {read / read_s:>10,.0f} frames/s  {size / read_s / 1e6:6.1f} MB/s  "
          f"({read} in {read_s:.2f} s)")


async def feed_and_read(settings: PipelineSettings, frames: list, read_timeout: float = 2.0,
                        ) -> tuple[feeder.FeedStats, int, float]:
    """Feed ``frames`` into fresh topics and read them back: (the feed's stats, frames read,
    seconds reading). The topics are deleted afterwards."""
    await topics.ensure_topics(settings)
    try:
        producer = await clients.start_producer(settings)
        try:
            stats = await feeder.feed_frames(producer, settings, frames)
        finally:
            await producer.stop()
        start = time.monotonic()
        read = 0
        async for _ in clients.read_records(settings, "frames", timeout=read_timeout):
            read += 1
            if read == len(frames):
                break
        return stats, read, time.monotonic() - start
    finally:
        await topics.delete_topics(settings)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap-servers", default=None)
    asyncio.run(main(parser.parse_args()))
