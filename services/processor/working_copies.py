"""The run agent's working copies of the ``run`` table's values while batches are in flight.

Their layout on the changelog is ``services/processor/table_values.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import Any

from modelevents.services.processor.table_values import (
    RunWork,
    UnreadableState,
    unpack_run,
)


class WorkingCopies:
    """The run agent's view of the ``run`` table while batches are in flight (see "Pipelining").

    ``get`` gives the cached state of a run, else the table's. A state that the batch being
    computed got (``get`` … ``computed``) or a batch in flight changed (``computed`` …
    ``release``) is newer than its table value, or may become so, and stays cached; the others
    equal their table values and are evicted oldest first beyond ``limit``.
    """

    def __init__(self, table: Any, limit: int) -> None:
        self.table = table
        self.limit = limit
        self.cache: dict[bytes, RunWork] = {}
        self.in_flight: dict[bytes, int] = {}  # key → batches in flight that changed it
        self.computing: set[bytes] = set()  # keys the batch being computed got

    def get(self, key: bytes) -> RunWork:
        work = self.cache.pop(key, None)  # popped and put back: most recently used last
        if work is None:
            try:
                work = unpack_run(self.table.lookup(key)) or RunWork()
            except UnreadableState as exc:
                work = RunWork(unreadable=str(exc))
        self.cache[key] = work
        self.computing.add(key)
        return work

    def computed(self, changed: Iterable[bytes]) -> None:
        """The batch being computed is done: the states it changed are held until its writes
        are done (:meth:`release`)."""
        for key in changed:
            self.in_flight[key] = self.in_flight.get(key, 0) + 1
        self.computing.clear()

    def release(self, keys: Iterable[bytes]) -> None:
        for key in keys:
            left = self.in_flight[key] - 1
            if left:
                self.in_flight[key] = left
            else:
                del self.in_flight[key]
        excess = len(self.cache) - self.limit
        if excess > 0:
            busy = self.busy
            oldest = islice(self.cache, excess + len(self.in_flight) + len(self.computing))
            for key in [k for k in oldest if not busy(k)][:excess]:
                del self.cache[key]

    def busy(self, key: bytes) -> bool:
        return key in self.in_flight or key in self.computing

    def forget(self, key: bytes) -> None:
        self.cache.pop(key, None)

    def clear(self) -> None:
        assert not self.in_flight and not self.computing, "cleared with batches in flight"
        self.cache.clear()
