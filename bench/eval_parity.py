"""Adapter parity over a day of recorded frames: ``eval parity --from-archive`` at 1 M frames.

    .venv/bin/python bench/eval_parity.py [--frames 1000000] [--rounds 2] [--archive DIR]
        [--candidate git:REV] [--source DIR ...]

Writes a day of recorded frames (bench/frames_day.py: real recorded streams repeated and
re-keyed, ``--source`` directories of recordings, default the project's fixtures and the corpus
beside the checkout) to an audit archive, unless ``--archive`` names one already written, then
times three passes over it in this one process, taking turns for ``--rounds`` rounds so that a
slow moment of the machine hits every pass; each pass is the whole of what the command does
(read and decode the archive, group per run, translate by both revisions, compare):

  current vs current   the installed adapters against themselves — what ``replay parity``
                       does per frame, the baseline of the ratios
  old vs old (noise)   the installed adapters against a private copy of this checkout's
                       adapters/: must differ in nothing (the run stops if it does)
  candidate            the installed adapters against ``--candidate`` (default: the Chat
                       Completions adapter before the compatible-server fixes of issue #29)

Prints a Markdown table: per pass the median of its rounds' seconds and frames/s, its CPU time
per frame, the ratio of its CPU time to the baseline's, runs differing, and the peak resident
memory of the process.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from frames_day import SOURCES, recorded_streams, write_day

from modelevents.consumers.replay import checks
from modelevents.services.cli.commands.eval_parity import revision_parity
from modelevents.services.migration.parity.compare import ParityDiff
from modelevents.services.migration.parity.revision import load_revision

ROOT = Path(__file__).resolve().parents[1]
BEFORE_CHAT_FIXES = "git:d0fbb6ea76b18e9fae57a808d559b7062444e343^"


def one_pass(archive: Path, baseline_spec: str,
             candidate_spec: str) -> tuple[ParityDiff, float, float]:
    """(the comparison, wall seconds, CPU seconds)."""
    began, cpu = time.perf_counter(), time.process_time()
    baseline, candidate = load_revision(baseline_spec), load_revision(candidate_spec)
    unreadable: list[checks.Unreadable] = []
    runs = checks.archived_frames_by_run(archive, unreadable, None, baseline.normalizer)
    diff = revision_parity(baseline, candidate, runs)
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    if unreadable:
        raise SystemExit(f"{len(unreadable)} unreadable records in {archive}")
    return diff, seconds, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--archive", type=Path, help="an archive bench/frames_day.py wrote")
    parser.add_argument("--candidate", default=BEFORE_CHAT_FIXES)
    parser.add_argument("--source", type=Path, action="append",
                        help="a directory of recordings (repeatable; default: tests/fixtures "
                             "and the recorded provider corpus beside the checkout)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-eval-parity-"))
    try:
        archive = args.archive
        if archive is None:
            streams, skipped = recorded_streams(tuple(args.source or SOURCES))
            archive = work / "day"
            began = time.perf_counter()
            runs, frames, records = write_day(archive, streams, args.frames)
            print(f"generated {frames:,} frames ({records:,} records, {runs:,} runs, "
                  f"{len(streams)} recorded streams, {len(skipped)} inputs left out) in "
                  f"{time.perf_counter() - began:.1f} s", file=sys.stderr)
        copy = work / "checkout"
        shutil.copytree(ROOT / "adapters", copy / "adapters",
                        ignore=shutil.ignore_patterns("__pycache__"))

        passes = (("current vs current (baseline)", "installed"),
                  ("old vs old (noise)", str(copy)),
                  (f"candidate {args.candidate}", args.candidate))
        walls: dict[str, list[float]] = {label: [] for label, _ in passes}
        cpus: dict[str, list[float]] = {label: [] for label, _ in passes}
        diffs: dict[str, ParityDiff] = {}
        for round_no in range(args.rounds):
            for label, candidate in passes:
                diff, seconds, cpu = one_pass(archive, "installed", candidate)
                walls[label].append(seconds)
                cpus[label].append(cpu)
                diffs[label] = diff
                print(f"  round {round_no + 1} {label}: {seconds:.1f} s ({cpu:.1f} s CPU), "
                      f"{diff.count('differs')} runs differ", file=sys.stderr)
                if candidate != args.candidate and not diff.ok:
                    raise SystemExit(f"{label}: {diff.count('differs')} runs differ; noise "
                                     "must be 0")

        base_label = passes[0][0]
        base_cpu = statistics.median(cpus[base_label])
        frames = diffs[base_label].frames
        print(f"| {frames:,} frames, {len(diffs[base_label].runs):,} runs, median of "
              f"{args.rounds} rounds | seconds | frames/s | CPU µs/frame | × baseline CPU | "
              "runs differing | added / removed / changed events |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, _ in passes:
            wall, cpu, t = (statistics.median(walls[label]), statistics.median(cpus[label]),
                            diffs[label].totals())
            print(f"| {label} | {wall:.1f} | {frames / wall:,.0f} | {cpu / frames * 1e6:.1f} | "
                  f"{cpu / base_cpu:.2f} | {diffs[label].count('differs'):,} | "
                  f"{t.added:,} / {t.removed:,} / {t.changed:,} |")
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\npeak resident memory {rss_mb:,.0f} MB", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
