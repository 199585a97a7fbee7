"""The feeder without a broker: frames as normalize reads them, and the duplicate plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.adapters.registry import normalize_file, translate
from modelevents.schemas.end_of_input import is_end_of_input, with_end_markers
from modelevents.schemas.errors import InputError
from modelevents.services.local.feeder import duplicate_plan, frames_for_file
from tests.paths import FIXTURES

FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.parent.name != "cassettes")


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fed_frames_translate_into_the_events_normalize_prints(path: Path) -> None:
    # The pipeline must derive from fed frames exactly the events (ids included) that
    # `modelevents normalize` prints for the same file.
    expected = normalize_file(path)
    fed = frames_for_file(path, received_at=0)
    assert (fed.run_id, fed.api) == (expected.run_id, expected.api)
    assert len(fed.frames) == expected.frame_count
    events = translate(fed.frames, fed.api, fed.run_id, "default", fed.frames[0].provider)
    assert [e.event_id for e in events] == [e.event_id for e in expected.events]
    assert [e.kind for e in events] == [e.kind for e in expected.events]


def test_frame_ids_are_deterministic() -> None:
    path = FIXTURES / "openai-chat" / "refusal.sse"
    a, b = frames_for_file(path, received_at=1), frames_for_file(path, received_at=1)
    assert a == b and len({f.frame_id for f in a.frames}) == len(a.frames)


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 42])
def test_duplicate_plan_keeps_originals_in_order(rate: float, seed: int) -> None:
    count = 200
    order = duplicate_plan(count, rate, seed)
    assert order == duplicate_plan(count, rate, seed)  # deterministic per seed
    seen: set[int] = set()
    originals = []
    position: dict[int, int] = {}
    for pos, index in enumerate(order):
        if index in seen:
            # A copy follows its original, at most a few originals later.
            assert pos > position[index]
            assert len(originals) - 1 - originals.index(index) <= 5
        else:
            seen.add(index)
            originals.append(index)
            position[index] = pos
    assert originals == list(range(count))
    if rate == 0.0:
        assert order == list(range(count))
    if rate == 1.0:
        assert len(order) == 2 * count


@pytest.mark.parametrize("seed", range(20))
def test_markers_are_never_duplicated_nor_passed_by_a_copy(seed: int) -> None:
    fed = frames_for_file(FIXTURES / "cassettes" / "anthropic-tool-loop.yaml")
    frames = with_end_markers(fed.frames)
    barriers = [is_end_of_input(f) for f in frames]
    order = duplicate_plan(len(frames), 1.0, seed, barriers=barriers)
    assert [i for i in order if barriers[i]] == [i for i, b in enumerate(barriers) if b]
    for pos, index in enumerate(order):
        later_markers = [i for i in order[:pos] if barriers[i] and i > index]
        assert not later_markers, "a copy was sent after a marker that follows its original"
    assert len(order) == len(frames) + sum(1 for b in barriers if not b)


def test_duplicate_rate_outside_0_1_is_refused() -> None:
    with pytest.raises(InputError, match="between 0 and 1"):
        duplicate_plan(3, 1.5)


def test_an_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        frames_for_file(tmp_path / "missing.sse")
