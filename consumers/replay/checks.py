"""Replay: check what the pipeline published against what its inputs say it should have.

Two checks, each reading a bounded snapshot of the topics (``topic_snapshot``) into memory:

* ``check_state`` — rebuild run state from ``events`` (dedupe by ``(run_id, seq)``, one
  ``RunMachine`` per run, exactly as the sequencer folds them) into a fresh view and compare it
  with the latest record of each run on ``runs``. Per run: ``equal``, ``differs`` (with the
  fields), ``missing`` (a side has no such run) or ``partial`` (the range starts inside the run:
  its state cannot be rebuilt from there, so it is not compared).
* ``check_parity`` — re-normalize ``frames`` through the current adapters with the processor's
  own per-run normalizer (``services.normalizer.RunNormalizer``: one adapter per run and API,
  closed at end-of-input markers) and compare the result with the run's events on ``events``
  after dedupe, position by position: event id, kind, payload and source. Frames are grouped per
  run key in log order; a key that another run announced as its provider object id (a webhook or
  poll of that object) joins that run. That is adapter parity after a fix: which runs a changed
  adapter would publish differently, and where the first difference is. Either check can read
  an audit archive instead of the topics; ``frames_by_run`` and ``archived_frames_by_run`` take
  another revision's normalizer too (``eval parity``, services/migration/parity/).

Both answer with plain data (``StateReport``, ``ParityReport``); the command prints them.
Compare on a quiet pipeline: events still on their way make a run look behind.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from modelevents.consumers.errors import EmptyRange, MissingTopic, NoSuchRun
from modelevents.consumers.replay.topic_snapshot import RawRecord, Start, read_snapshot
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import is_end_of_input
from modelevents.schemas.errors import InputError, SchemaError
from modelevents.schemas.events import ModelEvent, Usage, payload_dict
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.run_state import RunState
from modelevents.services.kafka.clients import run_key_bytes
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.run_logic.event_parity import event_diff_fields
from modelevents.services.run_logic.normalizer import RunNormalizer
from modelevents.services.run_logic.renormalize import Renormalized, renormalize
from modelevents.services.run_logic.run_machine import RunMachine
from modelevents.services.run_logic.source_trust import ADAPTER as POLICY_ADAPTER

EXECUTOR = "executor"  # transport of events that no adapter made (tool results, approvals)


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A record that could not be decoded; it is reported, never skipped in silence."""

    topic: str
    partition: int
    offset: int
    reason: str


def _decode(rec: RawRecord, unreadable: list[Unreadable]) -> Any:
    if rec.value is None:
        return None
    try:
        return codec.decode(rec.value)
    except SchemaError as exc:
        unreadable.append(Unreadable(rec.topic, rec.partition, rec.offset, str(exc)))
        return None


def _key(run_id: str | None) -> bytes | None:
    return None if run_id is None else run_key_bytes(run_id)


async def _events(settings: PipelineSettings, start: Start, run_id: str | None,
                  unreadable: list[Unreadable]) -> dict[str, list[ModelEvent]]:
    """The run's events in log order (one run lives on one partition), per run id."""
    by_run: dict[str, list[ModelEvent]] = {}
    async for rec in read_snapshot(settings, "events", start=start, key=_key(run_id)):
        event = _decode(rec, unreadable)
        if isinstance(event, ModelEvent) and (run_id is None or event.run_id == run_id):
            by_run.setdefault(event.run_id, []).append(event)
        elif event is not None and not isinstance(event, ModelEvent):
            unreadable.append(Unreadable(rec.topic, rec.partition, rec.offset,
                                         f"a {type(event).__name__}, not a ModelEvent"))
    return by_run


# --- (a) run state ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FieldDiff:
    field: str
    rebuilt: Any
    published: Any


@dataclass
class RunStateCheck:
    run_id: str
    verdict: str  # equal | differs | missing | partial
    rebuilt: RunState | None = None
    published: RunState | None = None
    diffs: list[FieldDiff] = field(default_factory=list)
    events: int = 0  # events of the run read from the range, duplicates included
    first_seq: int | None = None
    note: str = ""


@dataclass
class StateReport:
    start: Start
    runs: list[RunStateCheck]
    unreadable: list[Unreadable]
    events_read: int = 0

    @property
    def ok(self) -> bool:
        return not self.unreadable and all(r.verdict in ("equal", "partial") for r in self.runs)

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.runs if r.verdict == verdict)


def rebuild(events: Iterable[ModelEvent]) -> tuple[RunState, int | None, int]:
    """Fold one run's events (log order) into a fresh RunState as the sequencer does: duplicates
    by seq are ignored. Returns (state, first seq seen, events read). A run whose first event in
    the range is not seq 0 is rebuilt from there without flagging the missing head."""
    machine: RunMachine | None = None
    first_seq: int | None = None
    count = 0
    for event in events:
        count += 1
        if machine is None:
            first_seq = event.seq
            state = RunState(run_id=event.run_id, tenant=event.tenant)
            if event.seq > 0:
                state.last_seq = event.seq - 1  # the head is outside the range, not lost
            machine = RunMachine(state)
        machine.apply(event)  # seq <= last_seq: DUPLICATE, nothing changes
    if machine is None:
        raise ValueError("a run has at least one event")
    return machine.state, first_seq, count


def _comparable(value: Any) -> Any:
    return payload_dict(value) if isinstance(value, Usage) else value


def diff_states(rebuilt: RunState, published: RunState,
                ignore: Iterable[str] = ()) -> list[FieldDiff]:
    skip = set(ignore)
    out = []
    for f in fields(RunState):
        if f.name in skip:
            continue
        a, b = getattr(rebuilt, f.name), getattr(published, f.name)
        if _comparable(a) != _comparable(b):
            out.append(FieldDiff(f.name, a, b))
    return out


def _check_fields(ignore: Iterable[str]) -> list[str]:
    names = {f.name for f in fields(RunState)}
    unknown = sorted(set(ignore) - names)
    if unknown:
        raise InputError(f"--ignore {', '.join(unknown)}: RunState has no such field; the fields "
                         f"are {', '.join(sorted(names))}")
    return list(ignore)


async def _latest_runs(settings: PipelineSettings, run_id: str | None,
                       unreadable: list[Unreadable]) -> dict[str, RunState]:
    """The latest RunState per run on the compacted ``runs`` topic (a tombstone deletes)."""
    latest: dict[str, RunState] = {}
    async for rec in read_snapshot(settings, "runs", key=_key(run_id)):
        if rec.value is None:  # tombstone: the run was deleted
            if rec.key is not None:
                latest.pop(rec.key.decode("utf-8", "replace"), None)
            continue
        state = _decode(rec, unreadable)
        if isinstance(state, RunState):
            latest[state.run_id] = state
        elif state is not None:
            unreadable.append(Unreadable(rec.topic, rec.partition, rec.offset,
                                         f"a {type(state).__name__}, not a RunState"))
    return latest


def _archived_events(archive: Path, run_id: str | None,
                     unreadable: list[Unreadable]) -> dict[str, list[ModelEvent]]:
    """The events of an audit archive (``modelevents audit run``), per run id, in the order
    they were archived — the log order of their partition. Only blocks that match their
    manifest are read (``audit verify`` says whether any did not)."""
    from modelevents.consumers.audit.export import archived_records

    by_run: dict[str, list[ModelEvent]] = {}
    for rec in archived_records(Path(archive)):
        # Not events: frames, input packets (audit/inputs.py), tool receipts (audit/receipts.py).
        if rec.topic.endswith(("frames", "run-inputs", "receipts")):
            continue
        try:
            event = codec.decode(rec.value) if rec.value is not None else None
        except SchemaError as exc:
            unreadable.append(Unreadable(rec.topic, rec.partition, rec.offset, str(exc)))
            continue
        if isinstance(event, ModelEvent):
            if run_id is None or event.run_id == run_id:
                by_run.setdefault(event.run_id, []).append(event)
        else:
            unreadable.append(Unreadable(rec.topic, rec.partition, rec.offset,
                                         f"a {type(event).__name__}, not a ModelEvent"))
    return by_run


async def check_state(settings: PipelineSettings, *, start: Start = Start(),
                      run_id: str | None = None, ignore: Iterable[str] = (),
                      archive: Path | None = None) -> StateReport:
    """Rebuild run state from ``events`` (from ``start``) — or from the events of an audit
    archive directory (``archive``; ``start`` is then the whole archive) — and compare it with
    ``runs``."""
    ignore = _check_fields(ignore)
    unreadable: list[Unreadable] = []
    if archive is not None:
        by_run = _archived_events(archive, run_id, unreadable)
    else:
        by_run = await _events(settings, start, run_id, unreadable)
    published = await _latest_runs(settings, run_id, unreadable)
    whole_log = start.offset in (None, 0) and start.time_ms is None
    if run_id is not None and run_id not in by_run and (run_id not in published or not whole_log):
        where = f"on {settings.topic('events')} {start.describe()}"
        if run_id in published:
            raise EmptyRange(f"run {run_id} has no events {where} (it is on "
                             f"{settings.topic('runs')}); start earlier")
        raise NoSuchRun(f"no run {run_id}: no events on {settings.topic('events')} and no record "
                        f"on {settings.topic('runs')}; check the run id and the topic prefix "
                        f"({settings.topic_prefix!r})")
    if not by_run and not whole_log:
        raise EmptyRange(f"no events on {settings.topic('events')} {start.describe()}")
    checks: list[RunStateCheck] = []
    for rid, events in by_run.items():
        state, first_seq, count = rebuild(events)
        check = RunStateCheck(rid, "equal", rebuilt=state, published=published.get(rid),
                              events=count, first_seq=first_seq)
        if first_seq is not None and first_seq > 0:
            check.verdict = "partial"
            check.note = (f"the range starts at seq {first_seq} of this run; its state cannot be "
                          "rebuilt from there (start earlier to compare it)")
        elif check.published is None:
            check.verdict = "missing"
            check.note = f"no record on {settings.topic('runs')}"
        else:
            check.diffs = diff_states(state, check.published, ignore)
            if check.diffs:
                check.verdict = "differs"
        checks.append(check)
    if whole_log:
        # Only a read of the whole log can say that a run on `runs` has no events at all.
        for rid in sorted(set(published) - set(by_run)):
            checks.append(RunStateCheck(rid, "missing", published=published[rid],
                                        note=f"no events on {settings.topic('events')}"))
    checks.sort(key=lambda c: c.run_id)
    return StateReport(start, checks, unreadable,
                       events_read=sum(len(v) for v in by_run.values()))


# --- (b) adapter parity -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventDiff:
    """The first position where the re-normalized and the published sequence differ."""

    position: int  # = seq of the published event there
    fields: tuple[str, ...]  # event_id, kind, payload, source; or "missing"/"extra"
    expected: ModelEvent | None  # what the current adapters give
    published: ModelEvent | None  # what is on `events`


@dataclass
class RunParity:
    run_id: str
    verdict: str  # equal | differs | missing (frames, no events) | no_frames (events, no frames)
    expected: int = 0  # re-normalized events after dedupe by event_id
    published: int = 0  # published events after dedupe by seq (executor events left out)
    first_diff: EventDiff | None = None
    only_expected: int = 0  # event ids the current adapters give that `events` lacks
    only_published: int = 0  # event ids on `events` the current adapters do not give
    changed: int = 0  # same event id, different kind/payload/source
    frames: int = 0
    published_adapters: tuple[str, ...] = ()
    current_adapters: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    @property
    def prefix_only(self) -> bool:
        """Everything published matches, only the tail is missing: the processor may lag."""
        return (self.verdict == "differs" and self.first_diff is not None
                and self.first_diff.published is None and self.only_published == 0
                and self.changed == 0)


@dataclass
class ParityReport:
    runs: list[RunParity]
    unreadable: list[Unreadable]
    frames_read: int = 0
    events_read: int = 0
    # Which run a frame keyed by a provider object id joined: as the processor logged it (its
    # rerouted topic), or by the claims of the re-normalization (no processor ran on this log).
    runs_from: str = "processor"

    @property
    def ok(self) -> bool:
        return not self.unreadable and all(r.verdict == "equal" for r in self.runs)

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.runs if r.verdict == verdict)


@dataclass(frozen=True, slots=True)
class _Placed:
    timestamp: int
    partition: int
    offset: int
    frame: ProviderFrame


def _merged(lists: list[list[_Placed]]) -> list[ProviderFrame]:
    # Each key's frames stay in log order; keys interleave by log timestamp.
    if len(lists) == 1:
        return [p.frame for p in lists[0]]
    return [p.frame for p in heapq.merge(*lists, key=lambda p: (p.timestamp, p.partition,
                                                                 p.offset))]


def renormalize_runs(by_key: dict[str, list[_Placed]], only: str | None = None,
                     normalizer: type[RunNormalizer] = RunNormalizer) -> dict[str, Renormalized]:
    """Frames per run key → re-normalized runs. A key is its own run unless a run announced it
    as a provider object id (a webhook or a poll of that object arrives keyed by the id): then
    its frames join that run. ``only``: just that run (and the keys it claims)."""
    keys = [only] if only is not None else sorted(by_key, key=lambda k: by_key[k][0].timestamp)
    results = {key: renormalize(_merged([by_key[key]]), key, normalizer)
               for key in keys if key in by_key}
    owner: dict[str, str] = {}
    for key in results:  # earliest run first: the first to claim an object id owns it
        for object_id in results[key].claims:
            if object_id != key and object_id in by_key:
                owner.setdefault(object_id, key)
    joined: dict[str, list[str]] = {}
    for object_id, run_id in owner.items():
        if run_id not in owner:  # a claimed key's own claims do not chain further
            joined.setdefault(run_id, []).append(object_id)
    for run_id, extra in joined.items():
        # The claimed keys' frames change the run's input: translate the whole of it again.
        results[run_id] = renormalize(_merged([by_key[run_id], *(by_key[k] for k in extra)]),
                                      run_id, normalizer)
        for key in extra:
            results.pop(key, None)
    return results


def published_sequence(events: Iterable[ModelEvent]) -> tuple[list[ModelEvent], int]:
    """A run's events as a consumer sees them: dedupe by seq (first copy wins), ordered by seq,
    executor events and the worker's policy violations (no adapter made them) left out.
    Returns (sequence, events left out)."""
    by_seq: dict[int, ModelEvent] = {}
    executor = 0
    for event in events:
        if event.source.transport == EXECUTOR or event.adapter == POLICY_ADAPTER:
            executor += 1
            continue
        by_seq.setdefault(event.seq, event)
    return [by_seq[s] for s in sorted(by_seq)], executor


def compare_sequences(run_id: str, expected: list[ModelEvent],
                      published: list[ModelEvent]) -> RunParity:
    result = RunParity(run_id, "equal", expected=len(expected), published=len(published))
    for position in range(max(len(expected), len(published))):
        exp = expected[position] if position < len(expected) else None
        pub = published[position] if position < len(published) else None
        if exp is None or pub is None:
            what = ("missing",) if pub is None else ("extra",)
            result.first_diff = EventDiff(position, what, exp, pub)
            break
        differing = event_diff_fields(exp, pub)
        if differing:
            result.first_diff = EventDiff(position, differing, exp, pub)
            break
    exp_by_id = {e.event_id: e for e in expected}
    pub_by_id = {e.event_id: e for e in published}
    result.only_expected = len(exp_by_id.keys() - pub_by_id.keys())
    result.only_published = len(pub_by_id.keys() - exp_by_id.keys())
    result.changed = sum(1 for i in exp_by_id.keys() & pub_by_id.keys()
                         if event_diff_fields(exp_by_id[i], pub_by_id[i]))
    if result.first_diff is not None:
        result.verdict = "differs"
    return result


def _drop_rerouted(by_key: dict[str, list[_Placed]], rerouted: list[_Placed]) -> None:
    """The processor copies a frame whose key another run claimed (or that had no key) to its
    run, and skips the original: drop one original per copy, the latest ones (a claim takes
    effect from some point of a key's frames on)."""
    copies: dict[tuple[str, str], int] = {}
    for placed in rerouted:
        ident = (placed.frame.run_key, placed.frame.frame_id)
        copies[ident] = copies.get(ident, 0) + 1
    for key, placements in by_key.items():
        keep: list[_Placed] = []
        for p in reversed(placements):
            ident = (key, p.frame.frame_id)
            if copies.get(ident, 0) > 0:
                copies[ident] -= 1
            else:
                keep.append(p)
        placements[:] = keep[::-1]


def _place(rec: RawRecord, out: dict[str, list[_Placed]], unreadable: list[Unreadable],
           by_kafka_key: bool) -> None:
    frame = _decode(rec, unreadable)
    if isinstance(frame, ProviderFrame):
        key = rec.key.decode("utf-8", "replace") if by_kafka_key and rec.key else frame.run_key
        out.setdefault(key, []).append(_Placed(rec.timestamp, rec.partition, rec.offset, frame))
    elif frame is not None:
        unreadable.append(Unreadable(rec.topic, rec.partition, rec.offset,
                                     f"a {type(frame).__name__}, not a ProviderFrame"))


async def _placed_frames(settings: PipelineSettings, topic: str,
                         unreadable: list[Unreadable],
                         by_kafka_key: bool) -> dict[str, list[_Placed]]:
    out: dict[str, list[_Placed]] = {}
    async for rec in read_snapshot(settings, topic):
        _place(rec, out, unreadable, by_kafka_key)
    return out


def _archived_frames(archive: Path, unreadable: list[Unreadable]) -> dict[str, list[_Placed]]:
    """The frames of an audit archive (``modelevents audit run --with-frames``) per run key,
    in the order they were archived — the log order of their partition."""
    from modelevents.consumers.audit.export import archived_records

    out: dict[str, list[_Placed]] = {}
    for rec in archived_records(Path(archive)):
        if rec.topic.endswith("frames"):
            _place(rec, out, unreadable, by_kafka_key=False)  # type: ignore[arg-type]
    return out


def archived_frames_by_run(archive: Path, unreadable: list[Unreadable], only: str | None = None,
                           normalizer: type[RunNormalizer] = RunNormalizer
                           ) -> dict[str, Renormalized]:
    """An audit archive's frames, re-normalized per run. No processor log comes with an
    archive: frames keyed by a provider object id join the run that claimed it
    (``renormalize_runs``)."""
    by_key = _archived_frames(archive, unreadable)
    if not by_key:
        raise EmptyRange(f"{archive} holds no frames (archive them with modelevents audit run "
                         "--with-frames)")
    return renormalize_runs(by_key, only, normalizer)


async def frames_by_run(settings: PipelineSettings, unreadable: list[Unreadable],
                  only: str | None = None,
                  normalizer: type[RunNormalizer] = RunNormalizer
                  ) -> tuple[dict[str, Renormalized], bool]:
    """Every frame, re-normalized per run. All partitions are read even for one run: a frame
    keyed by a provider object id may live on another partition.

    Which run a frame went to is what the processor logged when it ran: frames it re-keyed to a
    run are on its ``<app id>-frames-rerouted`` topic, keyed by that run. Without that topic
    (no processor ran on this log, e.g. an imported archive) runs are resolved from the claims
    the re-normalization itself makes (``renormalize_runs``). Returns (runs, rerouted topic
    read)."""
    # Late: the processor module loads Faust, which no other part of the CLI needs.
    from modelevents.services.kafka.topics import internal_topics

    by_key = await _placed_frames(settings, "frames", unreadable, by_kafka_key=False)
    try:
        rerouted = await _placed_frames(settings, internal_topics(settings)["rerouted"],
                                        unreadable, by_kafka_key=True)
    except MissingTopic:
        return renormalize_runs(by_key, only, normalizer), False
    _drop_rerouted(by_key, [p for placed in rerouted.values() for p in placed])
    runs: dict[str, Renormalized] = {}
    for run_id in sorted(by_key.keys() | rerouted.keys()) if only is None else [only]:
        lists = [lst for lst in (by_key.get(run_id), rerouted.get(run_id)) if lst]
        if lists:
            runs[run_id] = renormalize(_merged(lists), run_id, normalizer)
    return runs, True


def parity_of_run(run_id: str, run: Renormalized | None,
                  events: list[ModelEvent]) -> RunParity:
    """Adapter parity of one run: its re-normalized frames against its published events."""
    published, executor = published_sequence(events)
    expected = run.events if run is not None else []
    if run is None:
        result = RunParity(run_id, "no_frames", published=len(published))
        result.notes.append("events but no frames: nothing to re-normalize (frames deleted, or "
                            "fed under another run key)")
    elif not published:
        result = RunParity(run_id, "missing", expected=len(expected))
        result.notes.append("frames but no events: the processor published nothing for this run")
    else:
        result = compare_sequences(run_id, expected, published)
    if run is not None:
        result.frames = sum(1 for f in run.frames if not is_end_of_input(f))
        result.notes += run.notes
    if executor:
        result.notes.append(f"{executor} executor or policy event(s) left out (no adapter makes them)")
    result.published_adapters = tuple(sorted({e.adapter for e in published}))
    result.current_adapters = tuple(sorted({e.adapter for e in expected}))
    return result


async def check_parity(settings: PipelineSettings, *, run_id: str | None = None,
                       normalizer: type[RunNormalizer] = RunNormalizer,
                       archive: Path | None = None) -> ParityReport:
    """Re-normalize ``frames`` through the current adapters (or those ``normalizer`` names)
    and compare with ``events`` — both topics, or both from an audit archive (``archive``)."""
    unreadable: list[Unreadable] = []
    if archive is not None:
        runs = archived_frames_by_run(archive, unreadable, run_id, normalizer)
        logged = False
        events = _archived_events(archive, run_id, unreadable)
        where = f"no frames and no events in the archive {archive}"
    else:
        runs, logged = await frames_by_run(settings, unreadable, run_id, normalizer)
        events = await _events(settings, Start(), run_id, unreadable)
        where = (f"no frames on {settings.topic('frames')} and no events on "
                 f"{settings.topic('events')}; check the topic prefix ({settings.topic_prefix!r})")
    if run_id is not None and run_id not in runs and run_id not in events:
        raise NoSuchRun(f"no run {run_id}: {where} and the run id")
    results = [parity_of_run(rid, runs.get(rid), events.get(rid, []))
               for rid in sorted(runs.keys() | events.keys())]
    return ParityReport(results, unreadable,
                        frames_read=sum(len(r.frames) for r in runs.values()),
                        events_read=sum(len(v) for v in events.values()),
                        runs_from="processor" if logged else "claims")
