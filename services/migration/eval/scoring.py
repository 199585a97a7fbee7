"""One run scored: its gates first (rejected or accepted), then its task's checker and its figures
(reviewer effort, time to verified result, tokens and cache, full unit cost).

Time to verified result is from the request (the input packet's time) to the run's end — its
terminal event, or the last tool receipt when the eval reads it at its tool calls — and counts
only for a run whose task succeeded and whose every receipt's postcondition was confirmed (or
had none to check); otherwise it is None: a result nobody verified has no time to it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from modelevents.schemas.bundles import Bundle
from modelevents.schemas.transcript import ToolDeclaration
from modelevents.services.migration.eval.checkers import check_task
from modelevents.services.migration.eval.corpus import Corpus, Task
from modelevents.services.migration.eval.evidence import Digest, RunEvidence, digest, task_of
from modelevents.services.migration.eval.gates import GateFailure, check_gates
from modelevents.services.migration.eval.prices import PriceTable

_VERIFIED_POSTCONDITIONS = {"confirmed", "not_checked", None}


@dataclass
class ScoredRun:
    run_id: str
    task_id: str
    repeat: int
    bundle: str
    status: str
    gates: list[GateFailure] = field(default_factory=list)
    success: bool = False
    why: str = ""
    approvals: int = 0
    time_ms: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float | None = None
    unpriced: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    adapters: list[str] = field(default_factory=list)
    apis: list[str] = field(default_factory=list)
    errored: bool = False
    refused: bool = False
    unknown_events: int = 0
    needs_reconciliation: bool = False

    @property
    def accepted(self) -> bool:
        return not self.gates


def _verified_time(run: Digest, success: bool) -> int | None:
    if not success or run.started_at is None:
        return None
    finished = [r for r in run.receipts if r.phase == "finished"]
    if any(r.outcome != "succeeded" or r.postcondition not in _VERIFIED_POSTCONDITIONS
           for r in finished):
        return None
    end = max([run.finished_at or 0, *[r.finished_at or 0 for r in finished]])
    return max(end - run.started_at, 0) if end else None


def score_run(run: Digest, task: Task, repeat: int, bundle: str,
              bundle_tools: dict[str, ToolDeclaration] | None, prices: PriceTable) -> ScoredRun:
    gates = check_gates(task, run, bundle_tools)
    success, why = check_task(task.expect, run)
    usage = run.usage
    tool_cost = sum(r.cost for r in run.receipts if r.phase == "finished")
    model = run.models[-1] if run.models else None
    token_cost = prices.token_cost(model, usage)
    return ScoredRun(
        run_id=run.run_id, task_id=task.id, repeat=repeat, bundle=bundle,
        status=run.status, gates=gates, success=success, why=why,
        approvals=run.approvals, time_ms=_verified_time(run, success),
        input_tokens=(usage.input_tokens or 0) if usage else 0,
        output_tokens=(usage.output_tokens or 0) if usage else 0,
        cache_read_tokens=(usage.cache_read_tokens or 0) if usage else 0,
        cache_write_tokens=(usage.cache_write_tokens or 0) if usage else 0,
        cost=None if token_cost is None else token_cost + tool_cost,
        unpriced=[] if token_cost is not None or usage is None else [model or "(no model)"],
        models=run.models, adapters=run.adapters, apis=run.apis,
        errored=run.errors > 0 or run.status == "failed", refused=run.refusals > 0,
        unknown_events=run.unknown_events, needs_reconciliation=run.needs_reconciliation)


def score_runs(corpus: Corpus, runs: Iterable[RunEvidence], bundles: dict[str, Bundle],
               prices: PriceTable, *, only: list[str] | None = None
               ) -> tuple[dict[str, list[ScoredRun]], list[str]]:
    """Every eval run of ``corpus`` scored, grouped by bundle (in ``only``'s order when given;
    else as first seen), and notes on the runs left out (not an eval run, a task the corpus does
    not have, no bundle named, a bundle not in ``only``)."""
    grouped: dict[str, list[ScoredRun]] = {b: [] for b in only or ()}
    skipped: list[str] = []
    known = {t.id: t for t in corpus.tasks}
    for evidence in runs:
        ids = task_of(evidence.run_id)
        if ids is None or ids[0] not in known:
            skipped.append(f"{evidence.run_id}: not a run of a task of {corpus.ref}")
            continue
        run = digest(evidence)
        if run.bundle is None:
            skipped.append(f"{evidence.run_id}: names no bundle (request or run.started)")
            continue
        if only is not None and run.bundle not in grouped:
            continue
        bundle = bundles.get(run.bundle)
        tools = None if bundle is None else {t.declaration.name: t.declaration
                                              for t in bundle.tools}
        scored = score_run(run, known[ids[0]], ids[1], run.bundle, tools, prices)
        grouped.setdefault(run.bundle, []).append(scored)
    for runs_of in grouped.values():
        runs_of.sort(key=lambda r: (r.task_id, r.repeat, r.run_id))
    return grouped, skipped
