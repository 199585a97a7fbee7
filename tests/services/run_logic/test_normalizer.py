"""The normalizer's per-run logic without a broker: frames (and end-of-input markers) in, the
same events as `modelevents normalize` out, also across a pickle round trip (a restart)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from modelevents.adapters.registry import normalize_file
from modelevents.schemas.end_of_input import (
    END_OF_INPUT,
    end_of_input,
    is_end_of_input,
    with_end_markers,
)
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.local.feeder import frames_for_file
from modelevents.services.run_logic.normalizer import RunNormalizer
from tests.paths import FIXTURES

FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file())


def _fed(path: Path) -> tuple[str, list[ProviderFrame]]:
    fed = frames_for_file(path, received_at=0)
    return fed.run_id, with_end_markers(fed.frames)


def _sequenced(events: list[ModelEvent]) -> list[ModelEvent]:
    for seq, event in enumerate(events):
        event.seq = seq
    return events


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fed_frames_with_end_markers_normalize_like_the_offline_driver(path: Path) -> None:
    run_id, frames = _fed(path)
    run = RunNormalizer(run_id)
    events: list[ModelEvent] = []
    for frame in frames:
        translation = run.translate(frame)
        assert translation.failure is None
        events += translation.events
    assert _sequenced(events) == normalize_file(path).events


@pytest.mark.parametrize("path", [FIXTURES / "cassettes" / "anthropic-tool-loop.yaml",
                                  FIXTURES / "openai-chat" / "truncated.sse",
                                  FIXTURES / "gemini-interactions" / "hosted-tools-mixed.sse"],
                         ids=lambda p: p.name)
def test_a_run_continues_exactly_where_it_was_after_a_pickle_round_trip(path: Path) -> None:
    # What a worker restart or a rebalance does to the run's state: it goes through the changelog.
    run_id, frames = _fed(path)
    run = RunNormalizer(run_id)
    events: list[ModelEvent] = []
    for frame in frames:
        run = pickle.loads(pickle.dumps(run))
        events += run.translate(frame).events
    assert _sequenced(events) == normalize_file(path).events


def test_duplicated_frames_and_markers_add_nothing() -> None:
    path = FIXTURES / "openai-chat" / "truncated.sse"
    run_id, frames = _fed(path)
    run = RunNormalizer(run_id)
    events: list[ModelEvent] = []
    for frame in frames:
        events += run.translate(frame).events
        events += run.translate(frame).events  # every frame and marker twice
    assert _sequenced(events) == normalize_file(path).events


def test_the_end_of_a_poll_is_no_cut_but_the_end_of_the_run_closes_it() -> None:
    path = FIXTURES / "openai-responses" / "poll-2-in-progress-partial.json"
    run_id, frames = _fed(path)
    poll, stream_end, run_end = frames
    run = RunNormalizer(run_id)
    assert run.translate(poll).events
    assert run.translate(stream_end).events == []  # the next poll would continue it
    assert [e.kind for e in run.translate(run_end).events] == ["error"]  # stream_truncated


def test_a_frame_of_an_unknown_api_fails_with_the_apis_to_choose_from() -> None:
    [frame] = frames_for_file(FIXTURES / "openai-chat" / "vllm-error-object.json").frames
    frame.api = "openai-batches"
    translation = RunNormalizer("r").translate(frame)
    assert translation.events == [] and translation.error_type == "UnknownApi"
    assert "openai-batches" in translation.failure and "openai-responses" in translation.failure


def test_provider_object_ids_are_claimed_once_per_run() -> None:
    path = FIXTURES / "cassettes" / "anthropic-tool-loop.yaml"
    run_id, frames = _fed(path)
    run = RunNormalizer(run_id)
    claims = [claim for frame in frames for claim in run.translate(frame).claims]
    started = [e.payload.provider_object_id for e in normalize_file(path).events
               if e.kind == "run.started"]
    assert claims == list(dict.fromkeys(started)) and len(claims) == 2


def test_an_object_id_equal_to_the_run_id_is_not_claimed() -> None:
    path = FIXTURES / "openai-responses" / "poll-1-queued.json"
    [frame] = frames_for_file(path, run_id="resp_poll").frames
    assert RunNormalizer("resp_poll").translate(frame).claims == []


def test_applied_offsets_are_per_source_topic() -> None:
    run = RunNormalizer("r")
    run.mark_applied("frames", 7)
    assert run.already_applied("frames", 7) and not run.already_applied("frames", 8)
    assert not run.already_applied("rerouted", 0)


def test_end_of_input_markers() -> None:
    [frame] = frames_for_file(FIXTURES / "openai-chat" / "vllm-error-object.json").frames
    marker = end_of_input(frame, "stream")
    assert is_end_of_input(marker) and not is_end_of_input(frame)
    assert (marker.content_type, marker.run_key, marker.api) == (END_OF_INPUT, frame.run_key, frame.api)
    assert end_of_input(frame).frame_id != marker.frame_id
    with pytest.raises(ValueError, match="scope"):
        end_of_input(frame, "file")
