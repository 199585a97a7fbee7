"""The sequencer's per-run logic, without Kafka: candidate events in, ordered events and state out.

The stream processor (``services/processor/app.py``) keeps one :class:`RunSequence` per run, in the
same table value as the run's normalizer state, and hands it, in order, the candidate events of
the run: those its adapters translate from the run's frames, and those producers send to
``ingest`` (a tool result, an approval, an external producer). For each it decides:

- **already applied** (an ``ingest`` record at or below ``applied_offset``): the state was
  written after the broker acknowledged this record's outputs, so they are durable — skip it.
  (A frame's candidates need no such check: the normalizer state beside this one skips a frame
  whose outputs are durable, and both are written together.)
- **duplicate event id** (among the run's last :data:`EVENT_ID_WINDOW` ids): the same event from
  another path (an executor retrying, a webhook repeating a stream, an adapter created anew) —
  drop it;
- otherwise **sequence** it: ``seq`` = the run's next number (contiguous from 0), advance the run
  state machine, and publish. An illegal transition is published all the same (it happened) and
  also reported; the run is flagged ``needs_reconciliation`` by the machine.

Why this is exact under at-least-once delivery: the processor writes a run's state only after
the outputs of the batch that changed it were acknowledged, and acks the source records only
after the state was written. A crash anywhere leaves each run's state at the end of some batch;
records after it are redelivered and processed again from that state, which assigns them the
same numbers as before. So a consumer that dedupes ``events`` by ``(run_id, seq)`` sees 0, 1,
2, … with no gap and no two different events under one number.

State is bounded per run: the event id window holds 64-bit hashes; the run state caps its own
notes. The processor releases a terminal run's state after the retention period.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field

from modelevents.schemas.events import KINDS, ModelEvent
from modelevents.schemas.run_state import RunState
from modelevents.services.run_logic.run_machine import Outcome, RunMachine

# Duplicates by event id come from a second path for the same event and arrive close to the
# first; a redelivery after a crash is caught by offsets (the frame's, or the ingest record's).
EVENT_ID_WINDOW = 256


def id_hash(event_id: str) -> int:
    """A stable 64-bit digest (Python's hash() differs between processes)."""
    return int.from_bytes(hashlib.blake2b(event_id.encode(), digest_size=8).digest(), "little")


@dataclass
class Step:
    """The outcome for one candidate event."""

    event: ModelEvent | None = None  # to publish on events (seq assigned)
    skipped: str | None = None  # why nothing is published: applied | duplicate
    failure: str | None = None  # set: a dead letter (stage ``failure_stage``) goes to dlq
    failure_stage: str = "sequence"
    error_type: str = ""


@dataclass
class RunSequence:
    state: RunState
    applied_offset: int = -1
    recent: deque[int] = field(default_factory=deque)  # id hashes, oldest first
    terminal_since: float | None = None  # wall clock, for release after the retention period
    _recent_set: set[int] = field(default_factory=set, repr=False)

    @classmethod
    def new(cls, run_id: str, tenant: str) -> RunSequence:
        return cls(RunState(run_id=run_id, tenant=tenant))

    def step(self, event: ModelEvent, now: float, ingest_offset: int | None = None) -> Step:
        """Sequence one decoded candidate event: translated from a frame (``ingest_offset``
        None), or read at ``ingest_offset`` of ``ingest``."""
        if ingest_offset is not None:
            if ingest_offset <= self.applied_offset:
                return Step(skipped="applied")
            self.applied_offset = ingest_offset
        if event.kind not in KINDS:
            return Step(failure=f"event {event.event_id} has kind {event.kind!r}, which is not in "
                                "the vocabulary; upgrade modelevents if a newer producer wrote it",
                        error_type="UnknownKind")
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
