"""Diff what two revisions of the adapters make of the same run's frames.

``compare_run`` takes one run's frames (log order, end-of-input markers included), runs them
through the baseline and the candidate revision with the processor's own per-run normalizer
(``services/run_logic/renormalize.py``), and compares the two event sequences position by
position (``services/run_logic/event_parity.py``: event id, kind, payload, source) and by event
id: events *added* (only the candidate makes them), *removed* (only the baseline does),
*changed* (same id, different content), the first differing position, and the same counts per
provider API (the API of the adapter that made the event). Frames one revision dead-letters and
the other does not are a difference too. ``ParityDiff`` adds the runs up per API.

The comparison ignores what differs between revisions by design — the adapter revision on each
event — so a revision compared with itself differs in nothing: that noise must be 0.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from modelevents.schemas.end_of_input import is_end_of_input
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.migration.parity.revision import AdapterRevision
from modelevents.services.run_logic.event_parity import event_diff_fields
from modelevents.services.run_logic.renormalize import Renormalized, renormalize

VERDICTS = ("equal", "differs")
_ADAPTER_ID = re.compile(r"\b(adapter \w+)@\S+")


@dataclass(frozen=True, slots=True)
class FirstDiff:
    """The first position where the two sequences differ."""

    position: int  # the seq both revisions would give the event there
    fields: tuple[str, ...]  # event_id, kind, payload, source; or ("added",) / ("removed",)
    baseline: ModelEvent | None
    candidate: ModelEvent | None


@dataclass
class Counts:
    """Events of one run (or of all runs) through both revisions, and how they differ."""

    baseline: int = 0
    candidate: int = 0
    added: int = 0
    removed: int = 0
    changed: int = 0

    def add(self, other: Counts) -> None:
        self.baseline += other.baseline
        self.candidate += other.candidate
        self.added += other.added
        self.removed += other.removed
        self.changed += other.changed


@dataclass
class RunDelta:
    run_id: str
    frames: int
    counts: Counts
    per_api: dict[str, Counts]
    first_diff: FirstDiff | None = None
    first_diff_api: str | None = None  # the API of the adapter that made the event there
    # Dead letters (frames a revision cannot translate) that only one revision has.
    dead_letters_baseline: list[str] = field(default_factory=list)
    dead_letters_candidate: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        differs = (self.first_diff is not None or self.dead_letters_baseline
                   or self.dead_letters_candidate)
        return "differs" if differs else "equal"


@dataclass
class ApiSummary:
    """One provider API over every run that has its frames or events."""

    runs: int = 0
    runs_differing: int = 0
    counts: Counts = field(default_factory=Counts)


@dataclass
class ParityDiff:
    baseline: AdapterRevision
    candidate: AdapterRevision
    runs: list[RunDelta] = field(default_factory=list)
    per_api: dict[str, ApiSummary] = field(default_factory=dict)
    frames: int = 0

    def add(self, delta: RunDelta) -> None:
        self.runs.append(delta)
        self.frames += delta.frames
        for api, counts in delta.per_api.items():
            summary = self.per_api.setdefault(api, ApiSummary())
            summary.runs += 1
            summary.counts.add(counts)
            if counts.added or counts.removed or counts.changed or delta.first_diff_api == api:
                summary.runs_differing += 1

    @property
    def ok(self) -> bool:
        return all(r.verdict == "equal" for r in self.runs)

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.runs if r.verdict == verdict)

    def totals(self) -> Counts:
        total = Counts()
        for r in self.runs:
            total.add(r.counts)
        return total


def _first_diff(baseline: list[ModelEvent], candidate: list[ModelEvent]) -> FirstDiff | None:
    for position in range(max(len(baseline), len(candidate))):
        old = baseline[position] if position < len(baseline) else None
        new = candidate[position] if position < len(candidate) else None
        if old is None or new is None:
            return FirstDiff(position, ("added",) if old is None else ("removed",), old, new)
        differing = event_diff_fields(old, new)
        if differing:
            return FirstDiff(position, differing, old, new)
    return None


def _apis(frames: Iterable[ProviderFrame]) -> set[str]:
    return {f.api for f in frames if not is_end_of_input(f)}


def diff_runs(run_id: str, baseline: Renormalized, candidate: Renormalized,
              api_of_adapter: dict[str, str]) -> RunDelta:
    """Compare one run's two translations (the same frames through two revisions)."""
    per_api = {api: Counts() for api in _apis(baseline.frames)}

    def api_of(event: ModelEvent) -> str:
        return api_of_adapter.get(event.adapter.partition("@")[0], event.adapter)

    for event in baseline.events:
        per_api.setdefault(api_of(event), Counts()).baseline += 1
    for event in candidate.events:
        per_api.setdefault(api_of(event), Counts()).candidate += 1
    first = _first_diff(baseline.events, candidate.events)
    if first is not None:
        old_by_id = {e.event_id: e for e in baseline.events}
        new_by_id = {e.event_id: e for e in candidate.events}
        for event_id, event in new_by_id.items():
            old = old_by_id.get(event_id)
            if old is None:
                per_api[api_of(event)].added += 1
            elif event_diff_fields(old, event):
                per_api[api_of(event)].changed += 1
        for event_id, event in old_by_id.items():
            if event_id not in new_by_id:
                per_api[api_of(event)].removed += 1
    counts = Counts()
    for api_counts in per_api.values():
        counts.add(api_counts)
    old_notes = {_dead_letter(n) for n in baseline.notes}
    new_notes = {_dead_letter(n) for n in candidate.notes}
    at = None if first is None else (first.candidate or first.baseline)
    return RunDelta(run_id, sum(1 for f in baseline.frames if not is_end_of_input(f)), counts,
                    per_api, first, None if at is None else api_of(at),
                    [n for n in baseline.notes if _dead_letter(n) not in new_notes],
                    [n for n in candidate.notes if _dead_letter(n) not in old_notes])


def _dead_letter(note: str) -> str:
    # The same frame refused the same way by both: only the adapter revision named differs.
    return _ADAPTER_ID.sub(r"\1", note)


def api_names(*revisions: AdapterRevision) -> dict[str, str]:
    """Adapter name (``openai_chat``) → provider API, over both revisions."""
    return {cls.name: api for rev in revisions for api, cls in rev.adapters.items()}


def compare_run(run_id: str, frames: list[ProviderFrame], baseline: AdapterRevision,
                candidate: AdapterRevision, *, baseline_run: Renormalized | None = None,
                api_of_adapter: dict[str, str] | None = None) -> RunDelta:
    """One run's frames through both revisions, compared. ``baseline_run``: the baseline's
    translation when the caller already has it (reading the frames made it)."""
    old = baseline_run or renormalize(frames, run_id, baseline.normalizer)
    new = renormalize(frames, run_id, candidate.normalizer)
    return diff_runs(run_id, old, new, api_of_adapter or api_names(baseline, candidate))


__all__ = ["Counts", "FirstDiff", "RunDelta", "ApiSummary", "ParityDiff", "compare_run",
           "diff_runs", "api_names", "VERDICTS"]
