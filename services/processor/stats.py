"""The processor's counters: what the progress line logs and what GET /metrics serves
(``services/processor/health.py`` reads them at scrape time).
"""

from __future__ import annotations


class Stats:
    def __init__(self) -> None:
        self.frames = self.candidates = self.ingested = self.events = self.dead = self.skipped = 0
        self.batches = 0  # of the run agent
        self.reported = (0, 0, 0, 0, 0)

    def line(self) -> str | None:
        now = (self.frames, self.candidates, self.ingested, self.events, self.dead)
        if now == self.reported:
            return None
        self.reported = now
        return (f"normalized {self.frames} frames into {self.candidates} candidate events, read "
                f"{self.ingested} from ingest; sequenced {self.events} events "
                f"({self.skipped} duplicates dropped) in {self.batches} batches; "
                f"{self.dead} dead letters")
