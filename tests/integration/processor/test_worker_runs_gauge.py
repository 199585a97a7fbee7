"""``modelevents_worker_runs{state}`` (issue #16) with two real workers of one app id on the real
broker, scraped over real HTTP: runs of every provider API fed, the sum over both workers'
scrapes is the runs on ``runs`` by state, each worker counts exactly the runs of the partitions
it logged it processes, and after one worker stops (its partitions revoked, the other recovers
them from the changelog) the one left counts them all."""

from __future__ import annotations

import re
import time
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelevents.adapters.registry import normalize_file
from modelevents.schemas.run_state import RUN_STATES, RunState
from modelevents.services.kafka.clients import partition_for_key
from modelevents.services.run_logic.run_machine import run_state_of
from tests.helpers import free_port
from tests.integration.pipeline import (
    HANG_GUARD_S,
    ONE_PER_API,
    Published,
    Worker,
    collect,
    feed,
    fixture_frames,
    run,
)

pytestmark = pytest.mark.kafka

COPIES = 3  # each recording fed under this many run ids: runs on every partition


def _runs_gauge(port: int) -> Counter[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return Counter({sample.labels["state"]: int(sample.value)
                    for family in text_string_to_metric_families(text)
                    for sample in family.samples if sample.name == "modelevents_worker_runs"})


def _owned(worker: Worker) -> set[int]:
    """The partitions the worker last said it processes ("processing partitions 0, 2 of 3")."""
    lines = re.findall(r"processing partitions ([\d, ]*|none) of \d+", worker.log_text())
    assert lines, worker.log_text()[-4000:]
    return {int(p) for p in lines[-1].split(", ") if p.strip().isdigit()}


def _by_state(runs: dict[str, RunState], partitions: int, owned: set[int] | None = None,
              ) -> Counter[str]:
    counts = Counter(state.status for run_id, state in runs.items()
                     if owned is None or partition_for_key(run_id.encode(), partitions) in owned)
    return Counter({state: counts.get(state, 0) for state in RUN_STATES})


def _until(condition, describe) -> None:
    """Wait for what the workers converge to; the deadline only guards against a hang."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        assert time.monotonic() < deadline, describe()
        time.sleep(0.2)


@pytest.mark.kafka
def test_the_sum_over_workers_is_the_runs_by_state_across_rebalances(settings, start_worker
                                                                     ) -> None:
    ports = [free_port(), free_port()]
    first = start_worker("gauge-a", extra=("--health-port", str(ports[0])))
    second = start_worker("gauge-b", extra=("--health-port", str(ports[1])))
    # Each run's final state, as the offline driver folds it (independent of the pipeline).
    final: dict[str, RunState] = {}
    for copy in range(COPIES):
        for path in ONE_PER_API:
            run_id, frames = fixture_frames(path, run_id=f"gauge-{copy}-{path.stem}")
            run(feed(settings, frames))
            final[run_id] = run_state_of(normalize_file(path).events)

    def finished(p: Published) -> bool:
        return all(rid in p.runs and p.runs[rid].last_seq == state.last_seq
                   for rid, state in final.items())

    published = run(collect(settings, finished))
    assert {rid: s.status for rid, s in published.runs.items()} == {
        rid: s.status for rid, s in final.items()}
    expected = _by_state(published.runs, settings.partitions)
    assert len(+expected) >= 3, expected  # several states: completed, incomplete, waiting …

    def totals() -> tuple[Counter[str], Counter[str]]:
        return _runs_gauge(ports[0]), _runs_gauge(ports[1])

    _until(lambda: sum(totals(), Counter()) == +expected,
           lambda: (totals(), expected, first.log_text()[-2000:], second.log_text()[-2000:]))
    a, b = totals()
    # Each worker counts exactly the runs of its partitions, every state present (0 included).
    owned_a, owned_b = _owned(first), _owned(second)
    assert owned_a and owned_b and not owned_a & owned_b
    assert a == _by_state(published.runs, settings.partitions, owned_a)
    assert b == _by_state(published.runs, settings.partitions, owned_b)
    assert +a and +b, (a, b)  # runs on both workers
    assert set(a) == set(b) == set(RUN_STATES)

    # One worker leaves: its partitions are revoked, the other recovers their runs and counts
    # them once its tables are recovered.
    assert second.terminate() == 0
    _until(lambda: _runs_gauge(ports[0]) == expected,
           lambda: (_runs_gauge(ports[0]), expected, first.log_text()[-3000:]))
    assert _owned(first) == set(range(settings.partitions))
