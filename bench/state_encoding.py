"""The worker's table values: encoding a run's state as plain data against ``pickle`` (the encoding
of earlier versions), in one run, on the same states.

    .venv/bin/python bench/state_encoding.py [--every 1] [--rounds 5]

The states are those a run's value holds after each frame (``--every``: after every n-th) of
every project fixture (and of the recorded corpus, ``SOURCES``, when it is there):
a RunWork of the run's adapters and numbering, as the run agent writes it once per batch that
changed the run, and reads it when it is not cached. Prints a Markdown table: µs per state
(the best of ``--rounds`` alternating rounds, so that the machine's slow moments hit both),
the ratio to pickle, and the mean value size.
"""

from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

from modelevents.schemas.end_of_input import with_end_markers
from modelevents.services.local.feeder import frames_for_file
from modelevents.services.processor.table_values import RunWork, unpack_run
from modelevents.services.run_logic.normalizer import RunNormalizer
from modelevents.services.run_logic.sequencer import RunSequence

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "tests" / "fixtures", ROOT.parent / "shared" / "fixtures"]
_NOT_STREAMS = {"SOURCES.md", "README.md", "webhook-test-vector.json"}


def states(every: int) -> list[RunWork]:
    out = []
    for root in SOURCES:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name not in _NOT_STREAMS):
            try:
                fed = frames_for_file(path, received_at=0)
            except Exception:
                continue
            work = RunWork(RunNormalizer(fed.run_id))
            for position, frame in enumerate(with_end_markers(fed.frames)):
                for event in work.normalizer.translate(frame).events:
                    work.sequence = work.sequence or RunSequence.new(fed.run_id, "default")
                    work.sequence.step(event, now=1000.0)
                if position % every == 0:
                    out.append(unpack_run(work.pack(60.0)))  # a copy: later frames change work
    return out


def per_state(action, items) -> float:
    start = time.perf_counter()
    for item in items:
        action(item)
    return (time.perf_counter() - start) / len(items) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=1, help="a state after every n-th frame")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (best taken)")
    args = parser.parse_args()
    works = states(args.every)
    pickles = [pickle.dumps(w, protocol=pickle.HIGHEST_PROTOCOL) for w in works]
    values = [w.pack(60.0) for w in works]
    best = {"pickle.dumps": float("inf"), "pack": float("inf"), "pickle.loads": float("inf"),
            "unpack_run": float("inf")}
    for _ in range(args.rounds):
        best["pickle.dumps"] = min(best["pickle.dumps"], per_state(
            lambda w: pickle.dumps(w, protocol=pickle.HIGHEST_PROTOCOL), works))
        best["pack"] = min(best["pack"], per_state(lambda w: w.pack(60.0), works))
        best["pickle.loads"] = min(best["pickle.loads"], per_state(pickle.loads, pickles))
        best["unpack_run"] = min(best["unpack_run"], per_state(unpack_run, values))
    size_pickle = sum(map(len, pickles)) / len(pickles)
    size_plain = sum(map(len, values)) / len(values)
    print(f"{len(works)} states (mean pickle {size_pickle:,.0f} B, plain value {size_plain:,.0f} B "
          f"= {size_plain / size_pickle:.2f}×)\n")
    print("| step | pickle (earlier versions) | plain data (this version) | ratio |")
    print("|---|---:|---:|---:|")
    print(f"| write a state | {best['pickle.dumps']:.1f} µs | {best['pack']:.1f} µs | "
          f"{best['pack'] / best['pickle.dumps']:.2f}× |")
    print(f"| read a state | {best['pickle.loads']:.1f} µs | {best['unpack_run']:.1f} µs | "
          f"{best['unpack_run'] / best['pickle.loads']:.2f}× |")


if __name__ == "__main__":
    main()
