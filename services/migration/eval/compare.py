"""Figures over accepted runs only, per bundle, and the paired comparison of two bundles.

Every figure carries the number of accepted runs it is computed from and the number of runs the
gates rejected, so a bundle cannot look good by failing fast. Figures are means per accepted run
(success rate, approvals asked, time to a verified result, tokens, unit cost), each with a 95 %
bootstrap interval (percentile, 2,000 resamples, a fixed seed so a re-score gives the same
numbers) that resamples tasks, not runs: the repeats of one task are not independent. The
paired comparison takes each task both bundles have accepted runs of, the per-task difference
of means (A − B), and resamples those tasks.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from modelevents.services.migration.eval.scoring import ScoredRun

RESAMPLES = 2000
SEED = 30


@dataclass(frozen=True)
class Figure:
    name: str
    value: float | None
    low: float | None
    high: float | None
    n: int  # accepted runs (or tasks, paired) it is computed from
    rejected: int  # runs the gates rejected, beside every figure


@cache
def _draws(n: int, resamples: int, seed: int) -> list[list[int]]:
    """The resamples' cluster indices, drawn once per size: every figure of an eval resamples
    the same tasks, so their intervals are comparable and the draws are paid for once."""
    rng = random.Random(seed)
    return [rng.choices(range(n), k=n) for _ in range(resamples)]


def bootstrap(clusters: Sequence[tuple[float, int]], resamples: int = RESAMPLES,
              seed: int = SEED) -> tuple[float, float] | None:
    """95 % percentile interval of a mean over clusters given as (sum, count): each resample
    draws as many clusters, with replacement, and takes sum of sums / sum of counts."""
    kept = [c for c in clusters if c[1]]
    if not kept:
        return None
    sums, counts = [c[0] for c in kept], [c[1] for c in kept]
    stats = sorted(sum(map(sums.__getitem__, draw)) / sum(map(counts.__getitem__, draw))
                   for draw in _draws(len(kept), resamples, seed))
    return stats[int(0.025 * resamples)], stats[min(int(0.975 * resamples), resamples - 1)]


# name → the value of one accepted run, or None when it has none
MEASURES: dict[str, Callable[[ScoredRun], float | None]] = {
    "task_success": lambda r: 1.0 if r.success else 0.0,
    "approvals_per_run": lambda r: float(r.approvals),
    "time_to_verified_ms": lambda r: None if r.time_ms is None else float(r.time_ms),
    "input_tokens": lambda r: float(r.input_tokens),
    "output_tokens": lambda r: float(r.output_tokens),
    "cache_read_tokens": lambda r: float(r.cache_read_tokens),
    "unit_cost": lambda r: r.cost,
}


def _per_task(runs: list[ScoredRun], measure: Callable[[ScoredRun], float | None]
              ) -> dict[str, tuple[float, int]]:
    """(sum, count) of the measure over each task's accepted runs that have it."""
    by_task: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for run in runs:
        if run.accepted and (value := measure(run)) is not None:
            cell = by_task[run.task_id]
            cell[0] += value
            cell[1] += 1
    return {task: (cell[0], int(cell[1])) for task, cell in by_task.items()}


def bundle_figures(runs: list[ScoredRun]) -> list[Figure]:
    """Each measure's mean over accepted runs, its interval resampling tasks (a task's repeats
    are not independent of each other)."""
    rejected = sum(not r.accepted for r in runs)
    out = []
    for name, measure in MEASURES.items():
        clusters = list(_per_task(runs, measure).values())
        n = sum(c for _, c in clusters)
        if not n:
            out.append(Figure(name, None, None, None, 0, rejected))
            continue
        interval = bootstrap(clusters)
        assert interval is not None
        out.append(Figure(name, sum(s for s, _ in clusters) / n, interval[0], interval[1], n,
                          rejected))
    return out


@dataclass(frozen=True)
class PairedFigure:
    name: str
    difference: float | None  # mean over paired tasks of (A − B)
    low: float | None
    high: float | None
    tasks: int
    rejected_a: int
    rejected_b: int


def paired(a: list[ScoredRun], b: list[ScoredRun]) -> list[PairedFigure]:
    """A − B per task over the tasks both have accepted runs of, for each measure."""
    rejected_a = sum(not r.accepted for r in a)
    rejected_b = sum(not r.accepted for r in b)
    out = []
    for name, measure in MEASURES.items():
        left, right = _per_task(a, measure), _per_task(b, measure)
        diffs = [(left[t][0] / left[t][1] - right[t][0] / right[t][1], 1)
                 for t in sorted(left.keys() & right.keys())]
        interval = bootstrap(diffs)
        out.append(PairedFigure(name, sum(d for d, _ in diffs) / len(diffs) if diffs else None,
                                interval[0] if interval else None,
                                interval[1] if interval else None,
                                len(diffs), rejected_a, rejected_b))
    return out
