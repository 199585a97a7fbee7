"""One run's recorded frames through a normalizer again, as the processor translated them.

``renormalize`` feeds a run's frames (log order, end-of-input markers included) to a fresh
per-run normalizer (``services/run_logic/normalizer.py``) and dedupes the candidate events by
event id as the sequencer does, numbering them by position. It is what ``replay parity``
compares with the published events and what ``eval parity`` runs twice — once per revision of
the adapters, by passing a normalizer class whose ``adapter_classes`` name the other revision.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.run_logic.normalizer import RunNormalizer


@dataclass
class Renormalized:
    """One run's frames through one revision of the adapters."""

    frames: list[ProviderFrame]  # log order, end-of-input markers included
    events: list[ModelEvent]  # deduped by event id as the sequencer dedupes, seq by position
    notes: list[str]  # frames the processor would dead-letter
    claims: list[str]  # provider object ids the run announced (run.started)


def renormalize(frames: list[ProviderFrame], run_id: str,
                normalizer: type[RunNormalizer] = RunNormalizer) -> Renormalized:
    """One run's frames (log order) through the processor's own per-run normalizer: one adapter
    per API of the run, closed where an end-of-input marker says the input ended."""
    state = normalizer(run_id)
    out = Renormalized(frames, [], [], [])
    seen: set[str] = set()
    for frame in frames:
        translation = state.translate(frame)
        if translation.failure is not None:
            out.notes.append(f"dead letter: {translation.failure}")
        out.claims += translation.claims
        for event in translation.events:
            if event.event_id not in seen:
                seen.add(event.event_id)
                out.events.append(event)
    for position, event in enumerate(out.events):
        event.seq = position
    return out
