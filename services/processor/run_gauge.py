"""The runs this worker owns, by their latest state: what ``modelevents_worker_runs{state}``
serves (services/processor/health.py), so that ``sum by (state)`` over every worker of an app id
is the cluster's count of runs in each state.

"Owns" means: the run's state is in this worker's ``run`` table on a partition assigned to it.
The count follows that table:

- a batch that changes runs sets each one's state (:meth:`RunsByState.put`, a dict update per
  changed run and batch);
- a run whose state the release timer deletes (past its retention) leaves the count;
- at a revocation the runs of the revoked partitions leave it at once (another worker will own
  them once it has recovered them);
- once a rebalance completed (Faust recovered the tables of the partitions assigned), the table
  is scanned for the runs of the owned partitions not counted yet — recovered from the changelog
  — and their states read from their table values (only the numbering is decoded, not the
  adapters: ``table_values.run_status``); runs of partitions no longer owned are dropped.

A value that cannot be read is not counted (its records are dead-lettered: see agents.py). The
scrape reads :attr:`RunsByState.counts` from the health server's thread: ``Counter.copy`` copies
the dict in one C call under the GIL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from modelevents.schemas.run_state import RUN_STATES
from modelevents.services.kafka.clients import partition_for_key

__all__ = ["RunsByState"]


class RunsByState:
    """Run key → its latest state, and the number of runs in each state."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.state: dict[bytes, str] = {}
        self.counts: Counter[str] = Counter()

    def put(self, key: bytes, status: str) -> None:
        old = self.state.get(key)
        if old == status:
            return
        if old is not None:
            self.counts[old] -= 1
        self.state[key] = status
        self.counts[status] += 1

    def drop(self, key: bytes) -> None:
        old = self.state.pop(key, None)
        if old is not None:
            self.counts[old] -= 1

    def keep_only(self, owned: set[int]) -> None:
        """Drop the runs whose partition is not one of ``owned``."""
        for key in [k for k in self.state if self.partition_of(k) not in owned]:
            self.drop(key)

    def partition_of(self, key: bytes) -> int:
        return partition_for_key(key, self.partitions)

    def gauge(self) -> Iterable[tuple[str, int]]:
        """(state, runs) for every state of the run machine, 0 included (a series that
        disappears reads as "no data", not as zero), then any other state a value held."""
        counts = self.counts.copy()
        yield from ((state, counts.pop(state, 0)) for state in RUN_STATES)
        yield from ((state, value) for state, value in sorted(counts.items()) if value)
