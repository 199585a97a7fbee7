"""A day of recorded frames: real recorded streams repeated and re-keyed into an audit archive.

    .venv/bin/python bench/frames_day.py OUT_DIR [--frames 1000000] [--partitions 4]

Every recorded stream of the project's fixtures (tests/fixtures) and of the recorded provider
corpus beside the checkout (tests/corpus.py says where; when present) is cut into frames as the feeder
cuts them (end-of-input markers included). Copies of them, each copy a run of its own (run key
``day-<copy>-<stream>``), are spread evenly over one day of log time and over ``--partitions``
partitions of the frames topic (by run key), until at least ``--frames`` frames (markers not
counted) are written, then archived with the audit archive's own writer (``modelevents audit
run --with-frames`` writes the same files), which ``eval parity --from-archive`` reads.
Inputs the feeder cannot cut (notes, request bodies) are left out and counted.
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

from modelevents.consumers.audit.writer import AuditWriter
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import is_end_of_input, with_end_markers
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.local.feeder import frames_for_file

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "tests" / "fixtures", ROOT.parent / "shared" / "fixtures")
FRAMES_TOPIC = "modelevents.frames"
DAY_MS = 86_400_000
_NOT_RECORDINGS = {"SOURCES.md", "README.md"}


@dataclass
class Stream:
    name: str
    frames: list[ProviderFrame]  # keyed by a placeholder run key; end-of-input markers included
    size: int  # frames, markers not counted


def recorded_streams(sources: tuple[Path, ...] = SOURCES) -> tuple[list[Stream], list[str]]:
    """Every recorded stream under ``sources`` cut into frames; and what could not be cut."""
    streams: list[Stream] = []
    skipped: list[str] = []
    for source in sources:
        if not source.is_dir():
            continue
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            if path.name in _NOT_RECORDINGS or path.name.endswith(".expected.jsonl"):
                continue
            name = path.relative_to(source).as_posix()
            try:
                feed = frames_for_file(path, run_id="r", received_at=0)
            except ModelEventsError as exc:
                skipped.append(f"{name}: {exc}")
                continue
            frames = with_end_markers(feed.frames)
            size = sum(1 for f in frames if not is_end_of_input(f))
            if size:
                streams.append(Stream(name, frames, size))
    return streams, skipped


def rekeyed(stream: Stream, run_key: str, received_at: int) -> list[ProviderFrame]:
    return [replace(f, run_key=run_key, received_at=received_at) for f in stream.frames]


def write_day(out: Path, streams: list[Stream], frames: int, *, partitions: int = 4,
              start_ms: int | None = None) -> tuple[int, int, int]:
    """Archive copies of ``streams`` until ``frames`` frames are written. Returns (runs, frames,
    records) — records count the end-of-input markers too."""
    runs_needed = 0
    total = 0
    while total < frames:
        total += streams[runs_needed % len(streams)].size
        runs_needed += 1
    start = start_ms if start_ms is not None else (int(time.time() * 1000) - DAY_MS)
    spacing = DAY_MS / max(runs_needed, 1)
    offsets = [0] * partitions
    written = records = 0
    writer = AuditWriter(out, source={"frames_topic": FRAMES_TOPIC})
    try:
        for n in range(runs_needed):
            stream = streams[n % len(streams)]
            run_key = f"day-{n // len(streams):05d}-{n % len(streams):04d}"
            stamp = start + int(n * spacing)
            partition = zlib.crc32(run_key.encode()) % partitions
            key = run_key.encode()
            for frame in rekeyed(stream, run_key, stamp):
                writer.add(FRAMES_TOPIC, partition, offsets[partition], stamp, key,
                           codec.encode(frame))
                offsets[partition] += 1
                records += 1
            written += stream.size
            if n % 2000 == 1999:
                writer.checkpoint()
    finally:
        writer.close()
    return runs_needed, written, records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the archive directory to write (must not exist)")
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"{args.out} exists; name a new directory")
    streams, skipped = recorded_streams()
    began = time.perf_counter()
    runs, frames, records = write_day(args.out, streams, args.frames, partitions=args.partitions)
    print(f"{len(streams)} recorded streams ({len(skipped)} inputs left out); {runs} runs, "
          f"{frames} frames ({records} records with end-of-input markers) in "
          f"{time.perf_counter() - began:.1f} s → {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
