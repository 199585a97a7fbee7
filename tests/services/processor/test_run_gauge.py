"""The count behind ``modelevents_worker_runs{state}`` (services/processor/run_gauge.py): a run
is counted once, in its latest state; dropped runs and runs of partitions given up leave it;
every state of the run machine is served, 0 included. The count across real workers and
rebalances: tests/integration/processor/test_worker_runs_gauge.py."""

from __future__ import annotations

from modelevents.schemas.run_state import RUN_STATES
from modelevents.services.kafka.clients import partition_for_key
from modelevents.services.processor.run_gauge import RunsByState


def test_a_run_counts_once_in_its_latest_state_and_leaves_when_dropped_or_given_up() -> None:
    runs = RunsByState(partitions=4)
    keys = [f"run-{i}".encode() for i in range(20)]
    for key in keys:
        runs.put(key, "in_progress")
    for key in keys[:5]:
        runs.put(key, "completed")
        runs.put(key, "completed")  # the same state again changes nothing
    runs.drop(keys[5])
    runs.drop(b"never-counted")
    gauge = dict(runs.gauge())
    assert list(gauge) == list(RUN_STATES)  # every state, in the machine's order
    assert (gauge["in_progress"], gauge["completed"], gauge["failed"]) == (14, 5, 0)
    kept = {0, 2}
    runs.keep_only(kept)
    left = [k for k in keys[:5] + keys[6:] if partition_for_key(k, 4) in kept]
    assert sum(dict(runs.gauge()).values()) == len(left) == len(runs.state)
    assert set(runs.state) == set(left)
