"""The audit archive's throughput against a real broker, one run, each figure beside a baseline
measured in the same run:

    .venv/bin/python bench/audit.py [--events 200000] [--port 19890] [--rounds 3] [--before REF]

  archive   `audit run`'s loop (archive_topics, in this process: consume with a group, write
            blocks, fsync, manifests, checkpoints, commits) over an events topic, to its end
  baseline  a raw aiokafka consumer (same group semantics, no processing) reading the same topic
  verify    verify_archive over the archive just written (chain, records decoded, runs)
  baseline  a plain sha256 over the same files' bytes (read + hash)
  --before  also verify each round's archive with the code of git revision REF and with this
            tree's, each in a child process of its own (their order alternating by round), so
            a change is measured against its predecessor on the same archive, in the same run

Rates are events per second of wall time and per CPU second of this process (the broker runs in
its own); the best of ``--rounds``. The events are the project's own fixtures normalized under
fresh run ids (~8 events per run), produced straight onto the topic (no worker needed).
Starts its own broker on ``--port`` (stopped at the end) unless KAFKA_BOOTSTRAP_SERVERS is set.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

from broker import bench_broker

from modelevents.adapters.registry import normalize_bytes
from modelevents.consumers.audit.format import archive_files
from modelevents.consumers.audit.verify import verify_archive
from modelevents.consumers.audit.writer import archive_topics
from modelevents.schemas import codec
from modelevents.services.kafka import topics
from modelevents.services.kafka.clients import make_consumer, start_client, start_producer
from modelevents.services.kafka.settings import PipelineSettings

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
# A child that verifies one archive and prints its events and times: with a tree, the
# modelevents of that tree (the editable install's import hooks taken out of the way).
VERIFY_CHILD = r"""
import json, pathlib, sys, time
tree, root = sys.argv[1], sys.argv[2]
if tree:
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in repr(f)]
    sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in repr(h)]
    sys.path_importer_cache.clear()
    sys.path.insert(0, tree)
try:
    from modelevents.consumers.audit import verify
except ImportError:  # an older revision: the verifier is consumers/audit_verify.py
    from modelevents.consumers import audit_verify as verify
assert not tree or verify.__file__.startswith(tree), verify.__file__
wall, cpu = time.perf_counter(), time.process_time()
report = verify.verify_archive(pathlib.Path(root))
print(json.dumps({"events": report.events, "ok": report.ok,
                  "wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}))
"""


def events_log(count: int) -> list[tuple[str, bytes]]:
    paths = sorted(p for p in FIXTURES.glob("*/*") if p.is_file())
    bodies = [(p, p.read_bytes()) for p in paths]
    out: list[tuple[str, bytes]] = []
    copy = 0
    while len(out) < count:
        for path, body in bodies:
            run_id = f"bench-{copy}-{path.parent.name}-{path.stem}"
            try:
                events = normalize_bytes(body, run_id=run_id).events
            except Exception:
                continue
            out += [(run_id, codec.encode(e)) for e in events]
        copy += 1
    return out[:count]


async def publish(settings: PipelineSettings, log: list[tuple[str, bytes]]) -> None:
    producer = await start_producer(settings)
    try:
        topic = settings.topic("events")
        futures = [await producer.send(topic, key=k.encode(), value=v) for k, v in log]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def raw_read(settings: PipelineSettings, group: str) -> int:
    consumer = make_consumer(settings, "events", group_id=group,
                             max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
    await start_client(consumer, settings)
    try:
        while not consumer.assignment():
            await consumer.getmany(timeout_ms=100)
        assigned = list(consumer.assignment())
        ends = await consumer.end_offsets(assigned)
        seen = 0
        await consumer.seek_to_beginning(*assigned)
        positions = {tp: 0 for tp in assigned}
        while any(positions[tp] < end for tp, end in ends.items()):
            batches = await consumer.getmany(timeout_ms=200, max_records=10000)
            for tp, messages in batches.items():
                for msg in messages:
                    seen += 1
                    positions[tp] = msg.offset + 1
        await consumer.commit()
        return seen
    finally:
        await consumer.stop()


def measure(fn):  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def sha_files(root: Path) -> int:
    total = 0
    for path in archive_files(root)[0] + archive_files(root)[1]:
        data = path.read_bytes()
        hashlib.sha256(data).digest()
        total += len(data)
    return total


def tree_at(ref: str, into: Path) -> Path:
    """The packages of git revision ``ref`` under ``into``/modelevents (importable from ``into``)."""
    package = into / "modelevents"
    package.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "schemas", "adapters",
                              "services", "consumers"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(package)], input=archive, check=True)
    return into


def verify_in_child(tree: Path | None, root: Path) -> tuple[int, float, float]:
    """(events, wall s, CPU s) of verify_archive in a child process (``tree``: that code)."""
    done = subprocess.run([sys.executable, "-c", VERIFY_CHILD, str(tree or ""), str(root)],
                          capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    assert out["ok"], f"verify ({tree or 'this tree'}) failed on {root}"
    return out["events"], out["wall"], out["cpu"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--port", type=int, default=19890)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--codec", default="deflate", choices=("deflate", "null"))
    parser.add_argument("--before", metavar="REF",
                        help="verify with git revision REF's code too, beside this tree's")
    args = parser.parse_args()

    with (bench_broker(args.port, "audit") as bootstrap,
          tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp):
        work = Path(tmp)
        before = tree_at(args.before, work / "before") if args.before else None
        tag = uuid.uuid4().hex[:8]
        settings = replace(PipelineSettings(bootstrap_servers=bootstrap),
                           topic_prefix=f"bench-audit-{tag}.")
        asyncio.run(topics.ensure_topics(settings))
        log = events_log(args.events)
        print(f"publishing {len(log):,} events ({sum(len(v) for _, v in log) / 1e6:.1f} MB of "
              f"values) ...", file=sys.stderr)
        asyncio.run(publish(settings, log))
        rows: dict[str, tuple[float, float]] = {}

        def best(label: str, wall: float, cpu: float) -> None:
            old = rows.get(label)
            if old is None or wall < old[0]:
                rows[label] = (wall, cpu)

        size = 0
        for round_ in range(args.rounds):
            seen, wall, cpu = measure(lambda r=round_: asyncio.run(raw_read(settings, f"raw-{r}")))
            assert seen == len(log), seen
            best("raw", wall, cpu)
            root = work / f"archive-{round_}"
            result, wall, cpu = measure(lambda r=round_, root=root: asyncio.run(archive_topics(
                settings, root, group=f"audit-{r}", until_end=True, codec=args.codec,
                checkpoint_records=50_000)))
            assert result.records == len(log), result.records
            best("archive", wall, cpu)
            report, wall, cpu = measure(lambda root=root: verify_archive(root))
            assert report.ok and report.events == len(log), report.problems[:5]
            best("verify", wall, cpu)
            size, wall, cpu = measure(lambda root=root: sha_files(root))
            best("sha256", wall, cpu)
            if before is not None:
                trees = [("verify-before", before), ("verify-now", None)]
                for label, tree in trees if round_ % 2 == 0 else trees[::-1]:
                    events, wall, cpu = verify_in_child(tree, root)
                    assert events == len(log), (label, events)
                    best(label, wall, cpu)
            print(f"round {round_ + 1}: " + ", ".join(f"{k} {len(log) / v[0]:,.0f}/s"
                                                       for k, v in rows.items()), file=sys.stderr)
        n = len(log)

        def rate(label: str) -> tuple[float, float]:
            wall, cpu = rows[label]
            return n / wall, n / cpu

        print(f"\n{n:,} events, {settings.partitions} partitions, codec {args.codec}, "
              f"archive {size / 1e6:.1f} MB; best of {args.rounds}\n")
        print("| figure | events/s (wall) | events/s per CPU second | vs baseline (wall) |")
        print("|---|---:|---:|---:|")
        for label, text, base in (
                ("raw", "baseline: raw aiokafka read of the topic", None),
                ("archive", "`audit run` (consume, blocks, fsync, manifests, commits)", "raw"),
                ("sha256", "baseline: plain sha256 over the archive's bytes", None),
                ("verify", "`audit verify` (chain, records, runs)", "sha256"),
                *((("verify-before", f"`audit verify` of {args.before}, a child process", None),
                   ("verify-now", "`audit verify` of this tree, a child process",
                    "verify-before")) if before is not None else ())):
            wall_rate, cpu_rate = rate(label)
            share = wall_rate / rate(base)[0] if base else 0.0
            ratio = (f"{share:.0%}" if share >= 0.1 else f"{share:.2%}") if base else "—"
            print(f"| {text} | {wall_rate:,.0f} | {cpu_rate:,.0f} | {ratio} |")
        if before is not None:
            (now_wall, now_cpu), (then_wall, then_cpu) = rate("verify-now"), rate("verify-before")
            print(f"\nverify, this tree against {args.before}: ×{now_wall / then_wall:.2f} wall, "
                  f"×{now_cpu / then_cpu:.2f} per CPU second")
        print("\nTargets: archived ≥ 50,000 events/s, verified ≥ 100,000 events/s (per core).")
        asyncio.run(topics.delete_topics(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
