"""The processor's counters: what the progress line logs and what GET /metrics serves
(``services/processor/health.py`` reads them at scrape time, from another thread).

The labelled counters are plain ``Counter``s the event loop updates (a dict update per record:
tens of nanoseconds against the ~76 µs a ModelEvent costs the worker); the scrape copies them
(``dict.copy`` holds the GIL for the whole copy, so it never sees a dict changing size).
"""

from __future__ import annotations

from collections import Counter

from modelevents.services.processor.run_gauge import RunsByState


class Stats:
    def __init__(self, partitions: int = 1) -> None:
        self.frames = self.candidates = self.ingested = self.events = self.dead = self.skipped = 0
        self.batches = 0  # of the run agent
        self.reported = (0, 0, 0, 0, 0)
        self.frames_by: Counter[tuple[str, str]] = Counter()  # (provider, api)
        self.events_by: Counter[tuple[str, str, str]] = Counter()  # (provider, api, kind)
        self.dead_by: Counter[tuple[str, str]] = Counter()  # (stage, error_type)
        self.states_entered: Counter[str] = Counter()  # RunState.status a run moved into
        self.runs = RunsByState(partitions)  # the runs this worker owns, by latest state
        # (topic, partition) -> records on the log not processed yet, from the partition
        # checks (PartitionOrder, faust/ordering.py); replaced whole, never updated in place.
        self.lag: dict[tuple[str, int], int] = {}

    def line(self) -> str | None:
        now = (self.frames, self.candidates, self.ingested, self.events, self.dead)
        if now == self.reported:
            return None
        self.reported = now
        return (f"normalized {self.frames} frames into {self.candidates} candidate events, read "
                f"{self.ingested} from ingest; sequenced {self.events} events "
                f"({self.skipped} duplicates dropped) in {self.batches} batches; "
                f"{self.dead} dead letters")
