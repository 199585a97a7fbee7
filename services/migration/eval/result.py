"""The eval result record (``schemas/avro/migration/eval_result.avsc``): what an eval found, dated
and scoped — the corpus version, each bundle with the model snapshots and adapter (API)
revisions its events actually reported, its gate failures, its figures over accepted runs with
the rejected count beside each, the paired comparisons, and every run's verdict.

The record is a plain dict: its JSON form (``--json``, ``--out``) is the same dict, and its Kafka
value (topic ``eval-results``, key ``result_id``) the Avro single-object encoding of it
(schemas/eval_results.py). The id
is ``evr-`` + SHA-256 of its canonical JSON without the id, so a re-score of the same runs at
the same time gives the same id.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import asdict
from typing import Any

import orjson

from modelevents.services.migration.eval.compare import bundle_figures, paired
from modelevents.services.migration.eval.gates import GateFailure
from modelevents.services.migration.eval.scoring import ScoredRun

RESULT_ID_PREFIX = "evr-"


def _rate(count: int, total: int) -> float:
    return count / total if total else 0.0


def _bundle_outcome(bundle: str, name: str | None, runs: list[ScoredRun],
                    not_started: list[str]) -> dict[str, Any]:
    gates: Counter[str] = Counter()
    for run in runs:
        gates.update({failure.gate for failure in run.gates})
    return {
        "bundle": bundle, "name": name, "runs": len(runs), "not_started": not_started,
        "accepted": sum(r.accepted for r in runs), "rejected": sum(not r.accepted for r in runs),
        "gate_failures": dict(sorted(gates.items())),
        "error_runs": sum(r.errored for r in runs), "refusal_runs": sum(r.refused for r in runs),
        "unknown_event_rate": _rate(sum(r.unknown_events > 0 for r in runs), len(runs)),
        "needs_reconciliation_rate": _rate(sum(r.needs_reconciliation for r in runs), len(runs)),
        "model_snapshots": sorted({m for r in runs for m in r.models}),
        "api_revisions": sorted({a for r in runs for a in r.adapters}),
        "unpriced": sorted({u for r in runs for u in r.unpriced}),
        "figures": [asdict(f) for f in bundle_figures(runs)],
    }


def _verdict(run: ScoredRun) -> dict[str, Any]:
    return {"run_id": run.run_id, "task": run.task_id, "repeat": run.repeat,
            "bundle": run.bundle, "status": run.status, "accepted": run.accepted,
            "gates": [asdict(g) for g in run.gates], "success": run.success, "why": run.why,
            "approvals": run.approvals, "time_ms": run.time_ms,
            "input_tokens": run.input_tokens, "output_tokens": run.output_tokens,
            "cache_read_tokens": run.cache_read_tokens, "cost": run.cost}


def scored_runs(record: dict[str, Any], bundle: str) -> list[ScoredRun]:
    """The runs of ``bundle`` in a result, as the comparison takes them."""
    return [ScoredRun(run_id=v["run_id"], task_id=v["task"], repeat=v["repeat"],
                      bundle=v["bundle"], status=v["status"],
                      gates=[GateFailure(g["gate"], g["evidence"]) for g in v["gates"]],
                      success=v["success"], why=v["why"], approvals=v["approvals"],
                      time_ms=v["time_ms"], input_tokens=v["input_tokens"],
                      output_tokens=v["output_tokens"],
                      cache_read_tokens=v["cache_read_tokens"], cost=v["cost"])
            for v in record["runs"] if v["bundle"] == bundle]


def comparison(a: list[ScoredRun], b: list[ScoredRun]) -> list[dict[str, Any]]:
    return [asdict(f) for f in paired(a, b)]


def result_id(record: dict[str, Any]) -> str:
    content = {k: v for k, v in record.items() if k != "result_id"}
    return RESULT_ID_PREFIX + hashlib.sha256(
        orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


def build_result(corpus_ref: str, mode: str, runs_by_bundle: dict[str, list[ScoredRun]],
                 names: dict[str, str] | None = None, created_at: int | None = None,
                 not_started: dict[str, list[str]] | None = None,
                 tenant: str | None = None) -> dict[str, Any]:
    """The record of one eval: bundles in the order given, each later one compared with the
    first (A = the first bundle, B = each other); ``not_started``: per bundle, the tasks the
    gateway refused to start (they are no run, and the result says so); ``tenant``: the tenant
    a live eval ran as (the gateway shows the result to it: routes/evals.py)."""
    names, not_started = names or {}, not_started or {}
    bundles = list(runs_by_bundle)
    record: dict[str, Any] = {
        "result_id": "", "corpus": corpus_ref,
        "created_at": int(time.time() * 1000) if created_at is None else created_at,
        "mode": mode, "tenant": tenant,
        "bundles": [_bundle_outcome(b, names.get(b), runs_by_bundle[b], not_started.get(b, []))
                    for b in bundles],
        "comparisons": [{"a": bundles[0], "b": other,
                         "figures": comparison(runs_by_bundle[bundles[0]], runs_by_bundle[other])}
                        for other in bundles[1:]],
        "runs": [_verdict(r) for b in bundles for r in runs_by_bundle[b]],
    }
    record["result_id"] = result_id(record)
    return record


def to_json(record: dict[str, Any]) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
