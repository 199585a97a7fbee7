"""The normalizer's per-run logic, without Kafka: a run's frames in, candidate ModelEvents out.

The stream processor (``services/processor/app.py``) keeps one :class:`RunNormalizer` per run in a
changelogged table, in one value with the run's sequencer state (``services/run_logic/sequencer.py``), and
hands it the run's frames in log order; their candidate events go straight to that sequencer
state. This module is pure, so it is tested without a broker and the processor stays wiring.

What one run's state holds, and why:

- ``adapters``: one adapter per provider API of the run, exactly as the offline driver
  (``adapters.registry``) keeps them, so a stream whose frames straddle a worker restart or a
  rebalance continues where it was (adapters are picklable by contract).
- ``applied``: per source topic, the offset of the last frame whose outputs are durable. The
  processor writes this state (with the sequencer state beside it, in one changelog record) only
  after the broker acknowledged the batch's events, so a redelivered frame at or below it is
  skipped, and one above it is translated again from the state before it — giving the same
  events with the same ids, which the sequencer state of that same moment numbers as before.
- ``claimed``: provider object ids (``resp_…``, ``msg_…``, interaction ids) this run announced
  in ``run.started``; the processor claims each once for the run (run key resolution).

End of input: what the end of a frame stream means is part of the translation; whoever publishes
frames publishes an end-of-input marker after them (``schemas/end_of_input.py``, the wire
convention), and :meth:`RunNormalizer.translate` acts on it: ``stream`` closes the stream's
adapter unless it saw the provider's terminal signal, ``run`` closes every adapter of the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from modelevents.adapters.base import Adapter
from modelevents.adapters.registry import ADAPTERS
from modelevents.schemas.end_of_input import (
    END_OF_STREAM_BODY,
    is_end_of_input,
)
from modelevents.schemas.events import ModelEvent, RunStarted
from modelevents.schemas.frames import ProviderFrame

# How many provider object ids one run remembers having claimed (a tool loop makes one per call).
MAX_CLAIMED = 64


@dataclass
class Translation:
    """What one frame gave: candidate events to sequence, object ids to claim, or why it failed."""

    events: list[ModelEvent] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    failure: str | None = None  # set: the frame goes to the dead-letter topic (stage translate)
    error_type: str = ""


@dataclass
class RunNormalizer:
    # Which adapter class reads each provider API: the installed ones. A subclass that names
    # another table translates with another revision of the adapters (``eval parity``); a class
    # attribute, so the pickled per-run state is the same either way.
    adapter_classes: ClassVar[Mapping[str, type[Adapter]]] = ADAPTERS

    run_id: str
    adapters: dict[str, Adapter] = field(default_factory=dict)
    applied: dict[str, int] = field(default_factory=dict)
    claimed: list[str] = field(default_factory=list)
    last_active: float = 0.0

    def already_applied(self, source: str, offset: int) -> bool:
        """True when the record at ``offset`` of ``source`` is already reflected in this state."""
        return offset <= self.applied.get(source, -1)

    def mark_applied(self, source: str, offset: int) -> None:
        if offset > self.applied.get(source, -1):
            self.applied[source] = offset

    def translate(self, frame: ProviderFrame) -> Translation:
        """Feed one frame (or act on an end-of-input marker). Never raises."""
        if is_end_of_input(frame):
            return self._end_of_input(frame)
        cls = self.adapter_classes.get(frame.api)
        if cls is None:
            return Translation(
                failure=f"frame {frame.frame_id} names provider API {frame.api!r}, which no adapter "
                        f"reads; a gateway must stamp one of: {', '.join(self.adapter_classes)}",
                error_type="UnknownApi")
        adapter = self.adapters.get(frame.api)
        if adapter is None:
            adapter = self.adapters[frame.api] = cls(
                self.run_id, tenant=frame.tenant, provider=frame.provider or None)
        try:
            events = adapter.feed(frame)
        except Exception as exc:
            return Translation(
                failure=f"adapter {adapter.adapter_id} raised on frame {frame.frame_id}: {exc!r}",
                error_type=type(exc).__name__)
        return self._result(events)

    def _end_of_input(self, marker: ProviderFrame) -> Translation:
        if marker.body == END_OF_STREAM_BODY:
            adapter = self.adapters.get(marker.api)
            # The offline driver's rule after each model call: a cut stream is reported where it
            # happened and the next call starts afresh; a poll that is not terminal yet is no cut.
            if adapter is None or marker.transport == "poll" or adapter.stream_complete:
                return Translation()
            del self.adapters[marker.api]
            return self._close([adapter])
        return self._close(list(self.adapters.values()))

    def _close(self, adapters: Iterable[Adapter]) -> Translation:
        events: list[ModelEvent] = []
        for adapter in adapters:
            try:
                events += adapter.close()
            except Exception as exc:
                return Translation(
                    failure=f"adapter {adapter.adapter_id} raised at end of input: {exc!r}",
                    error_type=type(exc).__name__)
        return self._result(events)

    def _result(self, events: list[ModelEvent]) -> Translation:
        claims = []
        for event in events:
            payload = event.payload
            if event.kind != "run.started" or not isinstance(payload, RunStarted):
                continue
            object_id = payload.provider_object_id
            if object_id and object_id != self.run_id and object_id not in self.claimed:
                self.claimed.append(object_id)
                del self.claimed[:-MAX_CLAIMED]
                claims.append(object_id)
        return Translation(events=events, claims=claims)
