"""Figures over accepted runs only, per bundle, and the paired comparison of two bundles.

Every figure carries the number of accepted runs it is computed from and the number of runs the
gates rejected, so a bundle cannot look good by failing fast. Figures are means per accepted run
(success rate, approvals asked, tokens, unit cost) or the median time to a verified result, each
with a 95 % bootstrap interval (percentile, 2,000 resamples, a fixed seed so a re-score gives the
same numbers). The paired comparison takes each task both bundles have accepted runs of, the
per-task difference of means (A − B), and resamples tasks.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def bootstrap(values: Sequence[float], statistic: Callable[[Sequence[float]], float] = _mean,
              resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    stats = sorted(statistic([values[rng.randrange(n)] for _ in range(n)])
                   for _ in range(resamples))
    return stats[int(0.025 * resamples)], stats[min(int(0.975 * resamples), resamples - 1)]


def _figure(name: str, values: list[float], rejected: int,
            statistic: Callable[[Sequence[float]], float] = _mean) -> Figure:
    if not values:
        return Figure(name, None, None, None, 0, rejected)
    interval = bootstrap(values, statistic)
    assert interval is not None
    return Figure(name, statistic(values), interval[0], interval[1], len(values), rejected)


# name → (value of one accepted run or None when it has none, statistic)
MEASURES: dict[str, tuple[Callable[[ScoredRun], float | None], Callable[..., float]]] = {
    "task_success": (lambda r: 1.0 if r.success else 0.0, _mean),
    "approvals_per_run": (lambda r: float(r.approvals), _mean),
    "time_to_verified_ms": (lambda r: None if r.time_ms is None else float(r.time_ms),
                            statistics.median),
    "input_tokens": (lambda r: float(r.input_tokens), _mean),
    "output_tokens": (lambda r: float(r.output_tokens), _mean),
    "cache_read_tokens": (lambda r: float(r.cache_read_tokens), _mean),
    "unit_cost": (lambda r: r.cost, _mean),
}


def bundle_figures(runs: list[ScoredRun]) -> list[Figure]:
    accepted = [r for r in runs if r.accepted]
    rejected = len(runs) - len(accepted)
    out = []
    for name, (measure, statistic) in MEASURES.items():
        values = [v for v in map(measure, accepted) if v is not None]
        out.append(_figure(name, values, rejected, statistic))
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


def _per_task(runs: list[ScoredRun], measure: Callable[[ScoredRun], float | None]
              ) -> dict[str, float]:
    by_task: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        if run.accepted and (value := measure(run)) is not None:
            by_task[run.task_id].append(value)
    return {task: _mean(values) for task, values in by_task.items()}


def paired(a: list[ScoredRun], b: list[ScoredRun]) -> list[PairedFigure]:
    """A − B per task over the tasks both have accepted runs of, for each measure."""
    rejected_a = sum(not r.accepted for r in a)
    rejected_b = sum(not r.accepted for r in b)
    out = []
    for name, (measure, _) in MEASURES.items():
        left, right = _per_task(a, measure), _per_task(b, measure)
        diffs = [left[t] - right[t] for t in sorted(left.keys() & right.keys())]
        interval = bootstrap(diffs)
        out.append(PairedFigure(name, _mean(diffs) if diffs else None,
                                interval[0] if interval else None,
                                interval[1] if interval else None,
                                len(diffs), rejected_a, rejected_b))
    return out
