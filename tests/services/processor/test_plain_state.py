"""A run's state as plain data (services/processor/plain_state.py): every adapter of every recording carries
on exactly after a round trip at any frame; provider data held in a state stays data; a state of
another version is read field by field, with defaults, or refused with what is missing."""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path

import orjson
import pytest

from modelevents.adapters.accumulate import Parts
from modelevents.adapters.openai_chat import OpenAIChatAdapter
from modelevents.adapters.registry import normalize_file
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.events import ModelEvent, Usage
from modelevents.services.errors import UnreadableState
from modelevents.services.local.feeder import frames_for_file
from modelevents.services.processor import plain_state
from modelevents.services.run_logic.normalizer import RunNormalizer
from tests.corpus import corpus_files, corpus_id, require_corpus
from tests.paths import FIXTURES

OWN = sorted(p for p in FIXTURES.rglob("*") if p.is_file())
# As the contract test reads the corpus: everything but a transcribed webhook test vector.
CORPUS = [p for p in corpus_files("") if p.name != "webhook-test-vector.json"]


def _round_trips_at_every_frame(path: Path) -> None:
    fed = frames_for_file(path, received_at=0)
    run = RunNormalizer(fed.run_id)
    events: list[ModelEvent] = []
    for frame in with_end_markers(fed.frames):
        tree = orjson.loads(plain_state.dumps(run))  # what the changelog holds: JSON
        run = plain_state.from_tree(tree)
        events += run.translate(frame).events
    for seq, event in enumerate(events):
        event.seq = seq
    assert events == normalize_file(path).events


@pytest.mark.parametrize("path", OWN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_run_of_every_own_recording_goes_on_the_same_after_a_round_trip_at_every_frame(path):
    _round_trips_at_every_frame(path)


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=corpus_id)
def test_a_run_of_every_recorded_stream_goes_on_the_same_after_a_round_trip_at_every_frame(path):
    require_corpus()
    _round_trips_at_every_frame(path)


def test_values_json_has_no_literal_for_keep_their_type() -> None:
    value = {"tuple": (1, "a"), "deque": deque(["x"]), "set": {("a", 1)}, "bytes": b"\x00\xff",
             "inf": math.inf, "-inf": -math.inf, "big": 2 ** 70, "neg": -(2 ** 63),
             "int keys": {1: "one", 2: Parts()}, "usage": Usage(input_tokens=3)}
    back = plain_state.loads(plain_state.dumps(value))
    assert {k: v for k, v in back.items() if k != "int keys"} == \
        {k: v for k, v in value.items() if k != "int keys"}
    assert type(back["tuple"]) is tuple and type(back["deque"]) is deque
    assert back["int keys"][1] == "one" and isinstance(back["int keys"][2], Parts)
    nan = plain_state.loads(plain_state.dumps(math.nan))
    assert math.isnan(nan)


def test_provider_data_held_in_a_state_stays_data_even_when_it_looks_like_a_tag() -> None:
    # A provider controls the raw documents an adapter holds (usage blocks, hosted tool bodies):
    # one shaped like an object tag must not come back as an object.
    hostile = {"$": "adapters.openai_chat.OpenAIChatAdapter", "run_id": "x", "$t": [1]}
    nested = {"raw": [hostile, {"$s": ["a"]}]}
    assert plain_state.loads(plain_state.dumps(nested)) == nested


def test_only_the_projects_state_classes_can_be_named() -> None:
    for tag in ("os.system", "builtins.eval", "subprocess.Popen", "services.processor._Processor",
                "services.gateway.app.create_app"):
        with pytest.raises(UnreadableState, match="does not have"):
            plain_state.from_tree({"$": tag})
    assert plain_state.state_class("adapters.accumulate.Parts") is Parts
    with pytest.raises(TypeError, match="not plain data"):
        plain_state.dumps(object())


def test_a_state_of_another_version_is_read_field_by_field() -> None:
    adapter = OpenAIChatAdapter("run-1", tenant="t1")
    tree = plain_state.to_tree(adapter)
    fields = tree["$state"]  # an adapter's state: its __getstate__, less what it derives
    assert "_seen" not in fields and "_seen_order" in fields
    del fields["stream_complete"]  # an attribute an earlier version did not have
    fields["gone_since"] = 1  # one this version no longer has: kept as it was (vars)
    back = plain_state.from_tree(tree)
    assert back.stream_complete is False and back.tenant == "t1" and back._seen == set()
    # A dataclass field missing takes its default; one unknown is left out.
    usage = plain_state.from_tree({"$": "schemas.events.Usage", "input_tokens": 5, "later": 1})
    assert usage == Usage(input_tokens=5)
    # A slot with no stored value and no default: refused, with its name.
    with pytest.raises(UnreadableState, match="Parts: its stored state does not fit"):
        plain_state.from_tree({"$": "adapters.accumulate.Parts", "$state": {"$t": [[], 0]}})
    with pytest.raises(UnreadableState, match="no stored 'run_id'"):
        plain_state.from_tree({"$": "services.normalizer.RunNormalizer"})


@pytest.mark.parametrize("tree, says", [
    ({"$q": 5}, "malformed"), ({"$b": "zz"}, "malformed"), ({"$f": "1e999x"}, "malformed"),
    ({"$x": 1}, "unknown tag"), ({"$d": [[1]]}, "malformed"),
])
def test_malformed_trees_are_refused_with_a_clear_error(tree, says) -> None:
    with pytest.raises(UnreadableState, match=says):
        plain_state.from_tree(tree)
    with pytest.raises(UnreadableState, match="not a JSON state"):
        plain_state.loads(b"{nope")


def test_hostile_trees_are_refused_not_obeyed() -> None:
    # Nested past any state's depth (orjson reads up to 1,024 levels).
    deep: object = "x"
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(UnreadableState, match="nested deeper"):
        plain_state.from_tree(deep)
    # An attribute that would change what the object is (an adapter keeps a __dict__).
    for name in ("__class__", "__dict__"):
        with pytest.raises(UnreadableState, match="which no state has"):
            plain_state.from_tree({"$": "adapters.openai_chat.OpenAIChatAdapter", "run_id": "r",
                                   name: {}})
    with pytest.raises(UnreadableState, match="malformed"):
        plain_state.from_tree({"$i": "9" * 5000})  # beyond Python's digit limit
    with pytest.raises(UnreadableState, match="malformed"):
        plain_state.from_tree({"$r": 0})  # no object met before


# Slots _Choice of adapters/openai_chat.py gained in revision 4 (issue #29).
CHAT_CHOICE_SLOTS_OF_REVISION_4 = ("reasoning_key", "reasoning_form", "reasoning_item", "signature",
                                   "tool_ids")


def _without(tree, tag: str, names: tuple[str, ...]) -> int:
    """Drop ``names`` from every object ``tag`` of a state tree: how an earlier version wrote it."""
    dropped = 0
    if isinstance(tree, dict):
        if tree.get("$") == tag:
            for name in names:
                dropped += tree.pop(name, None) is not None
        for value in tree.values():
            dropped += _without(value, tag, names)
    elif isinstance(tree, list):
        dropped += sum(_without(value, tag, names) for value in tree)
    return dropped


@pytest.mark.parametrize("name, cut", [("reasoning-then-text.sse", 2), ("tool-call-no-ids.sse", 3)])
def test_a_chat_run_stored_before_revision_4_goes_on_the_same(name, cut) -> None:
    # Cut in an open reasoning part / between a call's fragments, stored as revision 3 stored it.
    path = FIXTURES / "openai-chat" / name
    fed = frames_for_file(path, received_at=0)
    frames = with_end_markers(fed.frames)
    run = RunNormalizer(fed.run_id)
    events = [e for frame in frames[:cut] for e in run.translate(frame).events]
    tree = orjson.loads(plain_state.dumps(run))
    assert _without(tree, "adapters.openai_chat._Choice", CHAT_CHOICE_SLOTS_OF_REVISION_4)
    run = plain_state.from_tree(tree)
    events += [e for frame in frames[cut:] for e in run.translate(frame).events]
    for seq, event in enumerate(events):
        event.seq = seq
    assert events == normalize_file(path).events
