"""Replay, export and import throughput against a real broker, one run.

    .venv/bin/python bench/replay.py [--copies 100] [--port 19870]

Publishes ``--copies`` copies of every project fixture (each copy its own run: frames with
end-of-input markers, events as ``normalize`` gives them, the final RunState) on fresh topics,
then times, each on the whole log:

  state    rebuild run state from ``events`` and compare with ``runs``  (events/s)
  parity   re-normalize ``frames`` and compare with ``events``          (frames/s, events/s)
  export   events and frames to an Avro container file (deflate)       (records/s, file size)
  import   that file to fresh topics                                    (records/s)

Starts its own broker on ``--port`` (stopped at the end) unless KAFKA_BOOTSTRAP_SERVERS is
set. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

from broker import bench_broker

from modelevents.adapters.registry import normalize_bytes
from modelevents.consumers.replay import checks, export
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.services.kafka import topics
from modelevents.services.kafka.clients import start_producer
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.feeder import frames_for_file
from modelevents.services.run_logic.run_machine import run_state_of

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def log_of(copies: int) -> list[tuple[str, str, bytes]]:
    """(topic, key, value) of ``copies`` runs of every fixture."""
    out = []
    paths = sorted(p for p in FIXTURES.glob("*/*") if p.is_file())
    for copy in range(copies):
        for path in paths:
            run_id = f"bench-{copy}-{path.parent.name}-{path.stem}"
            events = normalize_bytes(path.read_bytes(), run_id=run_id).events
            frames = with_end_markers(frames_for_file(path, run_id=run_id).frames)
            out += [("frames", run_id, codec.encode(f)) for f in frames]
            out += [("events", run_id, codec.encode(e)) for e in events]
            out.append(("runs", run_id, codec.encode(run_state_of(events))))
    return out


async def publish(settings: PipelineSettings, log: list[tuple[str, str, bytes]]) -> None:
    producer = await start_producer(settings)
    try:
        futures = [await producer.send(settings.topic(t), key=k.encode(), value=v)
                   for t, k, v in log]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def timed(label: str, fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"  {label}: {seconds:.2f} s", file=sys.stderr)
    return result, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--copies", type=int, default=100)
    parser.add_argument("--port", type=int, default=19870)
    args = parser.parse_args()

    with bench_broker(args.port, "replay") as bootstrap:
        tag = uuid.uuid4().hex[:8]
        source = replace(PipelineSettings(bootstrap_servers=bootstrap),
                         topic_prefix=f"bench-replay-{tag}.")
        target = replace(source, topic_prefix=f"bench-replay-{tag}-import.")
        for s in (source, target):
            asyncio.run(topics.ensure_topics(s))
        log = log_of(args.copies)
        counts = {t: sum(1 for x in log if x[0] == t) for t in ("frames", "events", "runs")}
        print(f"publishing {len(log):,} records {counts} ...", file=sys.stderr)
        asyncio.run(publish(source, log))

        state, t_state = timed("state", lambda: asyncio.run(checks.check_state(source)))
        parity, t_parity = timed("parity", lambda: asyncio.run(checks.check_parity(source)))
        assert state.ok and parity.ok, "the published log should compare equal"
        out = Path(tempfile.mkdtemp()) / "bench.avro"
        exported, t_export = timed("export", lambda: asyncio.run(export.export_archive(
            source, out, export.Selection(from_ms=0), with_frames=True)))
        _, t_import = timed("import", lambda: asyncio.run(export.import_archive(target, out)))
        records = exported.events + exported.frames
        size = out.stat().st_size
        raw = sum(len(v) for t, _, v in log if t != "runs")
        print(f"| log: {len(state.runs):,} runs, {counts['events']:,} events, "
              f"{counts['frames']:,} frames | seconds | rate |")
        print("|---|---:|---:|")
        print(f"| replay state | {t_state:.2f} | {counts['events'] / t_state:,.0f} events/s |")
        print(f"| replay parity | {t_parity:.2f} | {counts['frames'] / t_parity:,.0f} frames/s "
              f"+ {counts['events'] / t_parity:,.0f} events/s |")
        print(f"| replay export --with-frames | {t_export:.2f} | {records / t_export:,.0f} "
              f"records/s ({size / 1e6:.1f} MB file, {raw / 1e6:.1f} MB of Kafka values) |")
        print(f"| replay import | {t_import:.2f} | {records / t_import:,.0f} records/s |")
        for s in (source, target):
            asyncio.run(topics.delete_topics(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
