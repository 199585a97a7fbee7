"""Frozen evaluation: recorded eval runs re-scored from an audit archive, no provider call.

    .venv/bin/python bench/eval_frozen.py [--copies 600] [--rounds 3]

Builds ``--copies`` copies of the example corpus run under two bundles (OpenAI Responses and
Chat Completions, every task each names a scenario for: the adapters' events of the scenario's
recording, the input packet, a receipt per tool call), writes them to an audit archive as
`audit run` keeps them, then times, in one process on one core, the paths taking turns:

  read      the archive's records decoded and gathered per run (events, packets, receipts):
            the baseline, what any reader of the archive pays (the cycle collector paused
            while it reads, as in rescore: the same conditions for both)
  rescore   ``eval run --from-archive``'s work: read, fold each run's state, the five gates,
            the checkers, the figures with bootstrap intervals, the result record

and rescore once more with Python's cycle collector left running (what pausing it buys). Prints
runs per CPU second of each (best round) and rescore as a share of read. Target: rescore ≥
5,000 runs/s.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from modelevents.consumers.audit.export import archived_records
from modelevents.consumers.tools.receipts import decode_receipt, is_receipt
from modelevents.schemas.eval_results import encode
from modelevents.services.migration.eval.corpus import EXAMPLE_CORPUS, load_corpus
from modelevents.services.migration.eval.evidence import digest
from modelevents.services.migration.eval.prices import load_prices
from modelevents.services.migration.eval.result import build_result
from modelevents.services.migration.eval.scoring import score_runs
from modelevents.services.migration.eval.sources import EvidenceBook, paused_cycle_collection
from tests.services.migration.eval.runs import (
    bundle,
    receipt,
    runs_for,
    write_archive,
)


def _receipt(value: bytes):  # type: ignore[no-untyped-def]
    return decode_receipt(value) if is_receipt(value) else None


def build(root: Path, copies: int):  # type: ignore[no-untyped-def]
    corpus = load_corpus("example")
    tools = list({t.name: t for task in corpus.tasks for t in task.tools}.values())
    bundles = [bundle("responses", "openai", "openai-responses", "gpt-5-mini", tools),
               bundle("chat", "openai", "openai-chat", "gpt-4o-mini", tools)]
    runs = []
    for copy in range(copies):
        for b in bundles:
            for run in runs_for(corpus, b, repeat=copy):
                for _, call_id, _, _ in digest(run).tool_calls:
                    run.receipts.append(receipt(run.run_id, call_id, "tool", "succeeded",
                                                op=f"{run.run_id}/{call_id}", cost=0.001))
                runs.append(run)
    write_archive(root, runs)
    return corpus, bundles, len(runs)


def read(root: Path) -> EvidenceBook:
    with paused_cycle_collection():  # as eval run does
        return EvidenceBook(_receipt).feed_all(rec.value for rec in archived_records(root))


def rescore(root: Path, corpus, bundles, prices,  # type: ignore[no-untyped-def]
            pause: bool = True) -> dict:
    with paused_cycle_collection() if pause else contextlib.nullcontext():  # as eval run does
        book = read(root) if pause else EvidenceBook(_receipt).feed_all(
            rec.value for rec in archived_records(root))
        grouped, _ = score_runs(corpus, book.runs(), {b.bundle_id: b for b in bundles},
                                prices, only=[b.bundle_id for b in bundles])
        record = build_result(corpus.ref, "frozen", grouped,
                              {b.bundle_id: b.name for b in bundles})
        encode(record)
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    prices = load_prices(EXAMPLE_CORPUS / "prices.example.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "archive"
        corpus, bundles, count = build(root, args.copies)
        print(f"{count} runs in the archive", file=sys.stderr)
        best = {"read": float("inf"), "rescore": float("inf"), "collector": float("inf")}
        for _ in range(args.rounds):
            start = time.process_time()
            book = read(root)
            best["read"] = min(best["read"], time.process_time() - start)
            assert len(book.runs()) == count
            start = time.process_time()
            record = rescore(root, corpus, bundles, prices)
            best["rescore"] = min(best["rescore"], time.process_time() - start)
            assert sum(b["runs"] for b in record["bundles"]) == count
            start = time.process_time()
            rescore(root, corpus, bundles, prices, pause=False)
            best["collector"] = min(best["collector"], time.process_time() - start)
    read_rate, rescore_rate = count / best["read"], count / best["rescore"]
    print("| path | runs | CPU s | runs/s |\n|---|---:|---:|---:|")
    print(f"| read (baseline) | {count} | {best['read']:.2f} | {read_rate:,.0f} |")
    print(f"| rescore | {count} | {best['rescore']:.2f} | **{rescore_rate:,.0f}** |")
    print(f"| rescore, the cycle collector running | {count} | {best['collector']:.2f} | "
          f"{count / best['collector']:,.0f} |")
    print(f"\nrescore at {rescore_rate / read_rate:.0%} of read; target ≥ 5,000 runs/s: "
          f"{'met' if rescore_rate >= 5000 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
