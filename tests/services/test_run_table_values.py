"""The processor's ``run`` table values (services/processor.py): a run's adapters and numbering,
pickled, with the times at which they may be released."""

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


def fixture_frames():
    return with_end_markers(frames_for_file(FIXTURE, run_id="run-1").frames)


def feed(work: RunWork, frames) -> list:
    """Feed frames to a run's adapters and numbering, as the run agent does: the events."""
    events = []
    for frame in frames:
        for event in work.normalizer.translate(frame).events:
            work.sequence = work.sequence or RunSequence.new("run-1", "")
            events.append(work.sequence.step(event, now=1000.0).event)
    return events


def run_work(frames_fed: int | None = None) -> RunWork:
    work = RunWork(RunNormalizer("run-1"))
    feed(work, fixture_frames()[:frames_fed])
    return work


def test_a_value_is_the_runs_pickle_and_unpacks_to_a_state_that_goes_on_the_same() -> None:
    rest = fixture_frames()[3:]
    for work in (run_work(frames_fed=3), run_work()):
        value = work.pack(retention=60)
        assert value[processor._EXPIRY.size:] == pickle.dumps(work, protocol=pickle.HIGHEST_PROTOCOL)
        again = processor._unpack(value)
        assert again.sequence.state == work.sequence.state
        # Not the pickles' bytes: a set rebuilt by unpickling may iterate in another order.
        # What a restored run must do is carry on as the original would have.
        if not work.sequence.state.terminal:
            assert feed(again, rest) == feed(work, rest) != []
            assert again.sequence.state == work.sequence.state


def test_release_times_say_when_the_adapters_and_the_whole_value_may_go() -> None:
    live, ended = run_work(frames_fed=3), run_work()
    live.normalizer.last_active = ended.normalizer.last_active = 2000.0
    # A live run keeps its numbering for ever; its adapters go after the retention period idle.
    assert processor._expiries(live.pack(retention=60)) == (math.inf, 2060.0)
    # An ended run goes whole once both its adapters and its numbering are due.
    assert processor._expiries(ended.pack(retention=60)) == (2060.0, 2060.0)
