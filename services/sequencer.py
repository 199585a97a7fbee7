"""The sequencer's per-run logic, without Kafka: candidate events in, ordered events and state out.

The stream processor (``services/processor.py``) keeps one :class:`RunSequence` per run in a
changelogged table and hands it the run's ``ingest`` records in log order. For each it decides:

- **already applied** (offset at or below ``applied_offset``): the state was written after the
  broker acknowledged this record's outputs, so they are durable — skip it;
- **replayed by the normalizer** (its origin says incarnation ``i``, position ``p`` and ``p`` is
  not above the highest position applied for ``i``): a redelivered frame translated again after
  a crash — the same event was sequenced already — drop it;
- **duplicate event id** (among the run's last :data:`EVENT_ID_WINDOW` ids): the same event from
  another path (an executor retrying, an adapter created anew) — drop it;
- otherwise **sequence** it: ``seq`` = the run's next number (contiguous from 0), advance the run
  state machine, and publish. An illegal transition is published all the same (it happened) and
  also reported; the run is flagged ``needs_reconciliation`` by the machine.

Why this is exact under at-least-once delivery: the processor writes a run's state only after
the outputs of the batch that changed it were acknowledged, and acks the source records only
after the state was written. A crash anywhere leaves each run's state at the end of some batch;
records after it are redelivered and processed again from that state, which assigns them the
same numbers as before. So a consumer that dedupes ``events`` by ``(run_id, seq)`` sees 0, 1,
2, … with no gap and no two different events under one number.

State is bounded per run: the event id window holds 64-bit hashes; the origin map keeps the last
:data:`MAX_ORIGINS` normalizer incarnations; the run state caps its own notes. The processor
releases a terminal run's state after the retention period (``expired``).
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field

from modelevents.schemas.events import KINDS, ModelEvent
from modelevents.schemas.run_state import RunState
from modelevents.services.run_machine import Outcome, RunMachine

# Duplicates by event id that reach the sequencer come from a second path for the same event, and
# arrive close to the first; replays after a crash are caught by position, whatever their number.
EVENT_ID_WINDOW = 256
MAX_ORIGINS = 4


def id_hash(event_id: str) -> int:
    """A stable 64-bit digest (Python's hash() differs between processes)."""
    return int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "little")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where the normalizer numbered a candidate event: its state's incarnation and position."""

    incarnation: str
    position: int

    HEADER = "modelevents-origin"

    def encode(self) -> bytes:
        return f"{self.position}@{self.incarnation}".encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Origin | None:
        if not raw:
            return None
        position, _, incarnation = raw.decode("utf-8", "replace").partition("@")
        try:
            return cls(incarnation, int(position))
        except ValueError:
            return None


@dataclass
class Step:
    """The outcome for one ingest record."""

    event: ModelEvent | None = None  # to publish on events (seq assigned)
    skipped: str | None = None  # why nothing is published: applied | replay | duplicate
    failure: str | None = None  # set: a dead letter (stage ``failure_stage``) goes to dlq
    failure_stage: str = "sequence"
    error_type: str = ""


@dataclass
class RunSequence:
    state: RunState
    applied_offset: int = -1
    origins: dict[str, int] = field(default_factory=dict)  # incarnation → highest position
    recent: deque[int] = field(default_factory=deque)  # id hashes, oldest first
    terminal_since: float | None = None  # wall clock, for release after the retention period
    _recent_set: set[int] = field(default_factory=set, repr=False)

    @classmethod
    def new(cls, run_id: str, tenant: str) -> RunSequence:
        return cls(RunState(run_id=run_id, tenant=tenant))

    def step(self, event: ModelEvent, offset: int, origin: Origin | None, now: float) -> Step:
        """Sequence one decoded candidate event read at ``offset`` of ``ingest``."""
        if offset <= self.applied_offset:
            return Step(skipped="applied")
        self.applied_offset = offset
        if event.kind not in KINDS:
            return Step(failure=f"event {event.event_id} has kind {event.kind!r}, which is not in "
                                "the vocabulary; upgrade modelevents if a newer producer wrote it",
                        error_type="UnknownKind")
        if origin is not None:
            highest = self.origins.get(origin.incarnation, -1)
            if origin.position <= highest:
                return Step(skipped="replay")
            self.origins[origin.incarnation] = origin.position
            if len(self.origins) > MAX_ORIGINS:
                del self.origins[next(iter(self.origins))]
        digest = id_hash(event.event_id)
        if digest in self._recent_set:
            return Step(skipped="duplicate")
        self._remember(digest)
        state = self.state
        event.seq = state.last_seq + 1
        notes_before = len(state.reconciliation_notes)
        outcome = RunMachine(state).apply(event)
        if state.terminal and self.terminal_since is None:
            self.terminal_since = now
        if outcome is Outcome.ILLEGAL:
            notes = state.reconciliation_notes
            reason = (notes[-1] if len(notes) > notes_before
                      else f"illegal {event.kind} while the run is {state.status}")
            return Step(event=event, failure=f"run {state.run_id} seq {event.seq}: {reason}",
                        failure_stage="apply", error_type="IllegalTransition")
        return Step(event=event)

    def expired(self, now: float, retention: float) -> bool:
        return self.terminal_since is not None and now - self.terminal_since >= retention

    def _remember(self, digest: int) -> None:
        self.recent.append(digest)
        self._recent_set.add(digest)
        if len(self.recent) > EVENT_ID_WINDOW:
            self._recent_set.discard(self.recent.popleft())

    # The hash set is derived from the deque: not pickled, rebuilt on load.
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_recent_set"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._recent_set = set(self.recent)
