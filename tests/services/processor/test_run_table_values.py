"""The worker's table values (services/processor/table_values.py): a run's adapters and numbering as plain
data behind the times at which they may be released; values of earlier versions (pickles) read
without running what they name; what cannot be read said, never guessed."""

from __future__ import annotations

import math
import os
import pickle
import struct
from pathlib import Path

import orjson
import pytest

from modelevents.schemas.end_of_input import with_end_markers
from modelevents.services.local.feeder import frames_for_file
from modelevents.services.processor.table_values import (
    FORMAT,
    RunWork,
    UnreadableState,
    expiries,
    pack_alias,
    run_status,
    unpack_alias,
    unpack_run,
)
from modelevents.services.run_logic.normalizer import RunNormalizer
from modelevents.services.run_logic.sequencer import RunSequence
from tests.paths import FIXTURES, LEGACY_VALUES

LEGACY = LEGACY_VALUES  # by the last version that pickled
# The fixture each legacy value holds the first half of (as make_legacy.py says).
LEGACY_HALVES = {"openai-chat": "reasoning-then-text.sse", "openai-responses": "text-with-usage.sse",
                 "anthropic-messages": "pause-turn-then-continuation.sse",
                 "gemini-generate": "tool-call-streamed-args.sse"}
CHAT = FIXTURES / "openai-chat" / "reasoning-then-text.sse"


def fixture_frames(path: Path = CHAT, run_id: str = "run-1"):
    return with_end_markers(frames_for_file(path, run_id=run_id, received_at=0).frames)


def feed(work: RunWork, frames, tenant: str = "") -> list:
    """Feed frames to a run's adapters and numbering, as the run agent does: the events."""
    events = []
    for frame in frames:
        for event in work.normalizer.translate(frame).events:
            work.sequence = work.sequence or RunSequence.new(frame.run_key, tenant)
            events.append(work.sequence.step(event, now=1000.0).event)
    return events


def run_work(frames_fed: int | None = None, path: Path = CHAT, tenant: str = "",
             run_id: str = "run-1") -> RunWork:
    work = RunWork(RunNormalizer(run_id))
    feed(work, fixture_frames(path, run_id)[:frames_fed], tenant)
    return work


def document(value: bytes) -> dict:
    return orjson.loads(value[16:])


def test_a_value_is_plain_data_and_unpacks_to_a_state_that_goes_on_the_same() -> None:
    rest = fixture_frames()[3:]
    for work in (run_work(frames_fed=3), run_work()):
        value = work.pack(retention=60)
        doc = document(value)
        assert doc["format"] == FORMAT == 1
        assert doc["normalizer"]["$"] == "services.normalizer.RunNormalizer"
        assert b"\x80\x05" not in value  # no pickle anywhere in it
        again = unpack_run(value)
        assert again.sequence.state == work.sequence.state and again.dropped is None
        # What a restored run must do is carry on as the original would have.
        if not work.sequence.state.terminal:
            assert feed(again, rest) == feed(work, rest) != []
            assert again.sequence.state == work.sequence.state


def test_release_times_say_when_the_adapters_and_the_whole_value_may_go() -> None:
    live, ended = run_work(frames_fed=3), run_work()
    live.normalizer.last_active = ended.normalizer.last_active = 2000.0
    # A live run keeps its numbering for ever; its adapters go after the retention period idle.
    assert expiries(live.pack(retention=60)) == (math.inf, 2060.0)
    # An ended run goes whole once both its adapters and its numbering are due.
    assert expiries(ended.pack(retention=60)) == (2060.0, 2060.0)


@pytest.mark.parametrize("api", sorted(LEGACY_HALVES))
def test_a_state_pickled_by_the_previous_version_is_read_and_the_run_goes_on_the_same(api) -> None:
    # The upgrade: a worker of this version recovers a changelog the previous one wrote.
    path = FIXTURES / api / LEGACY_HALVES[api]
    frames = fixture_frames(path, f"legacy-{api}")
    half = len(frames) // 2
    upgraded = unpack_run((LEGACY / f"legacy-run-{api}.bin").read_bytes())
    assert upgraded.dropped is None
    uninterrupted = run_work(frames_fed=half, path=path, tenant="default", run_id=f"legacy-{api}")
    assert upgraded.sequence.state == uninterrupted.sequence.state
    assert feed(upgraded, frames[half:]) == feed(uninterrupted, frames[half:]) != []
    # … and written back in this version's format.
    assert document(upgraded.pack(retention=60))["format"] == FORMAT


def test_an_alias_is_plain_data_and_the_previous_versions_alias_is_read() -> None:
    value = pack_alias("run-1", 4600.0)
    assert document(value) == {"format": 1, "run_id": "run-1"}
    assert unpack_alias(value) == "run-1" and expiries(value) == (4600.0, math.inf)
    assert unpack_alias((LEGACY / "legacy-alias.bin").read_bytes()) == "legacy-openai-chat"


class _Payload:
    """What an attacker who can write the changelog would put there."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize("unpack", [unpack_run, unpack_alias])
def test_a_pickle_naming_anything_but_a_state_class_is_refused_unread(tmp_path, unpack) -> None:
    marker = tmp_path / "ran"
    value = struct.pack("<dd", math.inf, math.inf) + pickle.dumps(_Payload(marker))
    with pytest.raises(UnreadableState, match="system.*refused unread"):
        unpack(value)
    assert not marker.exists()


@pytest.mark.parametrize("body, says", [
    (b'{"format": 2, "normalizer": null, "sequence": null}', "format '2'.*newer version"),
    (b'{"format": 1, "sequence": {"$": "os.system"}}', "class 'os.system'"),
    (b"\x00\x01garbage", "neither format 1 nor a pickle"),
    (b'["format", 1]', "format 'list'"),
])
def test_a_value_this_version_cannot_read_raises_a_clear_error(body, says) -> None:
    with pytest.raises(UnreadableState, match=says):
        unpack_run(struct.pack("<dd", 0.0, 0.0) + body)
    with pytest.raises(UnreadableState, match="shorter than its header"):
        unpack_run(b"\x00" * 10)


def test_adapters_that_cannot_be_read_are_dropped_but_the_numbering_is_kept() -> None:
    # A state written by another version whose adapter class this one does not have.
    work = run_work(frames_fed=3)
    doc = document(work.pack(retention=60))
    doc["normalizer"]["adapters"]["openai-chat"]["$"] = "adapters.openai_chat.RemovedAdapter"
    value = struct.pack("<dd", math.inf, 0.0) + orjson.dumps(doc)
    upgraded = unpack_run(value)
    assert upgraded.normalizer is None
    assert "RemovedAdapter" in upgraded.dropped
    assert upgraded.sequence.state == work.sequence.state


@pytest.mark.parametrize("path, value, says", [
    (("sequence", "$state", "state", "last_seq"), "12", "RunState does not fit"),
    (("sequence", "$state", "applied_offset"), [1], "numbering holds values of the wrong types"),
    (("sequence", "$state", "recent"), {"$q": ["a"]}, "numbering holds values of the wrong types"),
])
def test_a_value_of_the_right_classes_but_wrong_types_is_refused_not_a_crash_later(path, value,
                                                                                   says) -> None:
    # Hand-written onto the changelog: refused when read, so no batch raises on it later.
    doc = document(run_work(frames_fed=3).pack(retention=60))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(UnreadableState, match=says):
        unpack_run(struct.pack("<dd", math.inf, 0.0) + orjson.dumps(doc))


def test_adapters_bookkeeping_of_the_wrong_types_drops_the_adapters_only() -> None:
    work = run_work(frames_fed=3)
    doc = document(work.pack(retention=60))
    doc["normalizer"]["applied"] = {"frames": "7"}
    upgraded = unpack_run(struct.pack("<dd", math.inf, 0.0) + orjson.dumps(doc))
    assert upgraded.normalizer is None and "wrong types" in upgraded.dropped
    assert upgraded.sequence.state == work.sequence.state


def test_a_class_an_earlier_version_had_and_this_one_does_not_drops_the_adapters_only() -> None:
    legacy = (LEGACY / "legacy-run-openai-chat.bin").read_bytes()
    assert legacy.count(b"OpenAIChatAdapter") == 1
    gone = legacy.replace(b"OpenAIChatAdapter", b"OpenAIChatAdaptez")  # same length: a valid pickle
    upgraded = unpack_run(gone)
    assert upgraded.normalizer is None and "OpenAIChatAdaptez" in upgraded.dropped
    assert upgraded.sequence.state == unpack_run(legacy).sequence.state


def test_run_status_reads_the_state_without_the_adapters_of_this_and_the_previous_version() -> None:
    for work in (run_work(frames_fed=3), run_work()):
        assert run_status(work.pack(retention=60)) == work.sequence.state.status
    assert run_status(RunWork(RunNormalizer("run-1")).pack(retention=60)) is None  # no events yet
    for api in sorted(LEGACY_HALVES):
        value = (LEGACY / f"legacy-run-{api}.bin").read_bytes()
        assert run_status(value) == unpack_run(value).sequence.state.status
    with pytest.raises(UnreadableState):
        run_status(b"\0" * 16 + b'{"format": 99}')
