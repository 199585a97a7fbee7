"""The sequencer's per-run logic without a broker: contiguous seq, dedupe, and the same numbers
again when records are processed again from an earlier state (a crash before the commit)."""

from __future__ import annotations

import pickle
from pathlib import Path

from modelevents.adapters.registry import normalize_file
from modelevents.schemas.events import ModelEvent, ToolResult
from modelevents.services.run_logic.run_machine import run_state_of
from modelevents.services.run_logic.sequencer import EVENT_ID_WINDOW, RunSequence
from tests.paths import FIXTURES

CASSETTE = FIXTURES / "cassettes" / "anthropic-tool-loop.yaml"


def _candidates(path: Path = CASSETTE) -> list[ModelEvent]:
    events = normalize_file(path).events
    for event in events:
        event.seq = -1  # as adapters give them, before they are numbered
    return events


def _copy(event: ModelEvent) -> ModelEvent:
    return pickle.loads(pickle.dumps(event))


def _run(events: list[ModelEvent], run: RunSequence | None = None, first_offset: int | None = 0,
         ) -> tuple[RunSequence, list[ModelEvent]]:
    """Sequence ``events`` as ingest records from ``first_offset`` on (None: as a frame's
    candidates, which carry no offset of their own)."""
    run = run or RunSequence.new(events[0].run_id, "default")
    published = []
    for position, event in enumerate(events):
        offset = None if first_offset is None else first_offset + position
        step = run.step(_copy(event), 0.0, offset)
        if step.event is not None:
            published.append(step.event)
    return run, published


def test_events_are_numbered_from_zero_and_fold_into_the_run_state() -> None:
    candidates = _candidates()
    run, published = _run(candidates)
    assert [e.seq for e in published] == list(range(len(candidates)))
    assert [e.event_id for e in published] == [e.event_id for e in candidates]
    assert run.state == run_state_of(published) and run.state.status == "completed"
    assert run.terminal_since == 0.0 and run.expired(now=10.0, retention=10.0)
    assert not run.expired(now=9.9, retention=10.0)


def test_processing_again_from_an_earlier_state_gives_the_same_numbers() -> None:
    # A crash after the outputs of records 0..k were published but before the state written
    # after them: the records come again and are processed from the last state written.
    candidates = _candidates()
    for cut in (0, 5, len(candidates) - 1):
        before, _ = _run(candidates[:cut]) if cut else (RunSequence.new(candidates[0].run_id, "default"), [])
        saved = pickle.dumps(before)
        _, first = _run(candidates[cut:], run=pickle.loads(saved), first_offset=cut)
        _, again = _run(candidates[cut:], run=pickle.loads(saved), first_offset=cut)
        assert first == again and [e.seq for e in first] == list(range(cut, len(candidates)))


def test_ingest_records_at_or_below_the_applied_offset_are_skipped() -> None:
    candidates = _candidates()
    run, _ = _run(candidates)
    step = run.step(_copy(candidates[3]), 0.0, ingest_offset=3)
    assert step.skipped == "applied" and step.event is None


def test_a_frames_candidates_are_numbered_without_offsets_and_again_from_an_earlier_state() -> None:
    # A frame's candidates: the normalizer state beside this one skips frames already applied,
    # so a redelivered frame is processed again only from the state written before it.
    candidates = _candidates()
    saved = pickle.dumps(_run(candidates[:4], first_offset=None)[0])
    _, first = _run(candidates[4:], run=pickle.loads(saved), first_offset=None)
    _, again = _run(candidates[4:], run=pickle.loads(saved), first_offset=None)
    assert first == again and [e.seq for e in first] == list(range(4, len(candidates)))


def test_ingest_offsets_and_frame_candidates_interleave() -> None:
    candidates = _candidates()
    run, _ = _run(candidates[:3], first_offset=None)
    step = run.step(_copy(candidates[3]), 0.0, ingest_offset=0)  # the first ingest record
    assert step.event is not None and step.event.seq == 3 and run.applied_offset == 0
    step = run.step(_copy(candidates[4]), 0.0)  # a frame's candidate: no offset check
    assert step.event is not None and step.event.seq == 4 and run.applied_offset == 0


def test_the_same_event_from_another_path_is_dropped_by_its_id() -> None:
    candidates = _candidates()
    run, _ = _run(candidates[:4], first_offset=None)
    step = run.step(_copy(candidates[2]), 0.0, ingest_offset=10)
    assert step.skipped == "duplicate"


def test_the_id_window_is_bounded_and_survives_pickling() -> None:
    candidates = _candidates()
    run = RunSequence.new("r", "default")
    for offset in range(EVENT_ID_WINDOW + 10):
        event = _copy(candidates[1])
        event.event_id = f"id-{offset}"
        run.step(event, 0.0, offset)
    assert len(run.recent) == EVENT_ID_WINDOW
    restored = pickle.loads(pickle.dumps(run))
    old, recent = _copy(candidates[1]), _copy(candidates[1])
    old.event_id, recent.event_id = "id-0", f"id-{EVENT_ID_WINDOW + 9}"
    assert restored.step(recent, 0.0, 10_000).skipped == "duplicate"
    assert restored.step(old, 0.0, 10_001).event is not None  # fell out of the window


def test_an_illegal_transition_is_published_and_reported() -> None:
    candidates = _candidates()
    run, _ = _run(candidates)
    late = _copy(candidates[0])  # run.started after the run completed
    late.event_id = "late-start"
    step = run.step(late, 0.0, ingest_offset=len(candidates))
    assert step.event is not None and step.event.seq == len(candidates)
    assert step.failure_stage == "apply" and step.error_type == "IllegalTransition"
    assert "after the run ended completed" in step.failure
    assert run.state.needs_reconciliation


def test_a_tool_result_nobody_asked_for_is_illegal() -> None:
    run, _ = _run(_candidates(FIXTURES / "openai-chat" / "refusal.sse"))
    result = _copy(_candidates(FIXTURES / "openai-chat" / "refusal.sse")[0])
    result.kind, result.event_id = "tool.result", "executor:1"
    result.payload = ToolResult(tool_name="lookup", tool_call_id="call_x", output="{}")
    step = run.step(result, 0.0, ingest_offset=99)
    assert step.event is not None and step.failure_stage == "apply"


def test_an_unknown_kind_is_not_published() -> None:
    event = _copy(_candidates()[1])
    event.kind = "text.sparkle"
    step = RunSequence.new(event.run_id, "default").step(event, 0.0, 0)
    assert step.event is None and step.error_type == "UnknownKind"
    assert "text.sparkle" in step.failure
