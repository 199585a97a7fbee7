"""The processor's ``run`` table values (services/processor.py): a run's adapters and numbering
with their release times, pickled; a terminal run's pickle compressed."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

from modelevents.services import processor
from modelevents.services.feeder import frames_for_file
from modelevents.services.normalizer import RunNormalizer, with_end_markers
from modelevents.services.processor import RunWork
from modelevents.services.sequencer import RunSequence

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "openai-chat" / "reasoning-then-text.sse"


def run_work(frames_fed: int | None = None) -> RunWork:
    frames = with_end_markers(frames_for_file(FIXTURE, run_id="run-1").frames)
    work = RunWork(RunNormalizer("run-1"))
    for frame in frames[:frames_fed]:
        for event in work.normalizer.translate(frame).events:
            work.sequence = work.sequence or RunSequence.new("run-1", "")
            work.sequence.step(event, now=1000.0)
    return work


def test_a_live_run_is_stored_as_its_pickle_and_a_terminal_one_compressed() -> None:
    live, ended = run_work(frames_fed=3), run_work()
    assert live.sequence.terminal_since is None and ended.sequence.terminal_since == 1000.0
    live_value, ended_value = live.pack(retention=60), ended.pack(retention=60)
    header = processor._EXPIRY.size
    assert live_value[header:] == pickle.dumps(live, protocol=pickle.HIGHEST_PROTOCOL)
    assert ended_value[header:header + 1] == b"\x78"  # zlib
    assert len(ended_value) < len(pickle.dumps(ended, protocol=pickle.HIGHEST_PROTOCOL)) * 0.8
    for work, value in ((live, live_value), (ended, ended_value)):
        again = processor._unpack(value)
        assert pickle.dumps(again, protocol=5) == pickle.dumps(work, protocol=5)


def test_release_times_say_when_the_adapters_and_the_whole_value_may_go() -> None:
    live, ended = run_work(frames_fed=3), run_work()
    live.normalizer.last_active = ended.normalizer.last_active = 2000.0
    # A live run keeps its numbering for ever; its adapters go after the retention period idle.
    assert processor._expiries(live.pack(retention=60)) == (math.inf, 2060.0)
    # An ended run goes whole once both its adapters and its numbering are due.
    assert processor._expiries(ended.pack(retention=60)) == (2060.0, 2060.0)
