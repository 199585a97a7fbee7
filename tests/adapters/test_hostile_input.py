"""Every hostile-input case against EVERY adapter of the table (``ADAPTERS``): an adapter is
covered here the day it is registered (its fixtures: tests/fixtures/<api>/).

The contract (adapters/base.py): ``feed`` and ``close`` never raise for what the provider sent;
every event is of the vocabulary (its kind, the payload record ``KIND_PAYLOAD`` names, payload
fields of their declared types — the Avro codec encodes it); errors about hostile input use the
taxonomy (``malformed_frame``, ``unexpected_shape``, ``invalid_utf8``, ``protocol_violation``);
a cut stream ends with ``stream_truncated`` and never reports a ``run.finished`` that did not
happen; a frame delivered twice adds nothing; pickling the adapter between frames changes
nothing; no event is larger than a Kafka record.

The cases are built from the adapters' own fixture frames: mistyped and missing fields by
mutating one value of a frame's JSON (null, a list, an object, a string, a number, the key
deleted), chosen by hypothesis (bounded, derandomized: CI sees the same cases every run) and,
for each adapter's smallest streams, exhaustively.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from functools import cache
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelevents.adapters.accumulate import HOLD_BYTES
from modelevents.adapters.framing import detect_framing, frames_from_bytes
from modelevents.adapters.registry import ADAPTERS
from modelevents.schemas import codec, vocabulary
from modelevents.schemas.events import KIND_PAYLOAD, ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.schemas.pieces import assemble
from modelevents.schemas.vocabulary_check import check_event
from tests.paths import FIXTURES

APIS = sorted(ADAPTERS)
RUN_ID = "run-hostile"

# Adapters whose own defects this module tolerates, by vocabulary field (field → adapters that
# may put a raw provider value there). Empty: since the payload fields are typed with the
# vocabulary's Literals (issue #12), every adapter maps unknown raw values to the named
# fallback, and a defect that comes back fails here.
RAW_VALUES_PASSED_THROUGH: dict[str, frozenset[str]] = {}

# Adapters that may emit a record larger than MAX_RECORD_BYTES on huge provider values: Chat
# Completions keeps an unbounded raw finish_reason (as reason AND raw_reason) and emits it on
# a later, small frame ([DONE]), which the base does not cut into pieces (adapters/base.py
# _LIGHT_FRAME_BYTES: a small frame's events are assumed to fit).
RECORDS_TOO_LARGE = frozenset({"openai-chat"})


# --- the fixtures, as frames ---------------------------------------------------------------------


@cache
def streams(api: str) -> tuple[tuple[str, tuple[ProviderFrame, ...]], ...]:
    """(file name, frames) of every fixture of ``api``, frames named for the API."""
    folder = FIXTURES / api
    out = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else ():
        body = path.read_bytes()
        framing = detect_framing(body)
        frames = frames_from_bytes(body, run_key=RUN_ID, provider=ADAPTERS[api].default_provider,
                                   api=api, framing=framing)
        if frames:
            out.append((path.name, tuple(frames)))
    return tuple(out)


def small_streams(api: str, count: int = 2) -> list[tuple[str, tuple[ProviderFrame, ...]]]:
    """The ``count`` smallest streams of several frames (the byte-cut and exhaustive cases)."""
    several = [s for s in streams(api) if len(s[1]) >= 3]
    return sorted(several, key=lambda s: sum(len(f.body) for f in s[1]))[:count]


def with_body(frame: ProviderFrame, body: bytes) -> ProviderFrame:
    return replace(frame, body=body)


# --- running and checking ------------------------------------------------------------------------


def run(api: str, frames: list[ProviderFrame] | tuple[ProviderFrame, ...],
        pickle_between: bool = False) -> list[ModelEvent]:
    adapter = ADAPTERS[api](RUN_ID)
    events: list[ModelEvent] = []
    for frame in frames:
        events += adapter.feed(frame)
        if pickle_between:
            adapter = pickle.loads(pickle.dumps(adapter))
    return events + adapter.close()


def check(api: str, events: list[ModelEvent]) -> None:
    """What holds for every event of every adapter, whatever it was fed."""
    for event in events:  # every record as published: pieces of an event too large included
        # Every payload field of its declared type, or the stream processor cannot publish it.
        encoded = codec.encode(event)
        assert len(encoded) <= MAX_RECORD_BYTES or api in RECORDS_TOO_LARGE, (
            api, event.kind, len(encoded))
    for event in assemble(events):  # the events a consumer reads (pieces joined)
        assert event.kind in KIND_PAYLOAD, event.kind
        assert type(event.payload) is KIND_PAYLOAD[event.kind], (event.kind, event.payload)
        for line in check_event(event):
            field = line.split(" ", 1)[0]
            assert api in RAW_VALUES_PASSED_THROUGH.get(field, ()), f"{api}: {line}"
        if event.kind == "error" and event.payload.error_type in vocabulary.HOSTILE_INPUT_ERRORS:
            assert event.payload.retryable is False


def errors(events: list[ModelEvent]) -> list[str]:
    return [e.payload.error_type for e in events if e.kind == "error"]


def same(a: list[ModelEvent], b: list[ModelEvent]) -> bool:
    return [(e.event_id, e.kind, e.payload) for e in a] == [(e.event_id, e.kind, e.payload)
                                                           for e in b]


def test_every_registered_adapter_has_fixtures_to_be_attacked_with() -> None:
    for api in APIS:
        assert small_streams(api), f"{api}: no stream fixture of 3+ frames in {FIXTURES / api}"


# --- mistyped and missing fields -----------------------------------------------------------------

_REPLACEMENTS: tuple[Any, ...] = (None, [], [1, "x"], {}, {"x": 1}, "", "x", 0, -1, 3.5, True,
                                  2 ** 70)
_DELETE = object()


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a JSON document (the root excluded)."""
    out = []
    if type(value) is dict:
        for key, item in value.items():
            out.append(prefix + (key,))
            out += paths(item, prefix + (key,))
    elif type(value) is list:
        for index, item in enumerate(value):
            out.append(prefix + (index,))
            out += paths(item, prefix + (index,))
    return out


def mutated(doc: Any, path: tuple, replacement: Any) -> Any:
    doc = orjson.loads(orjson.dumps(doc))  # a deep copy
    node = doc
    for segment in path[:-1]:
        node = node[segment]
    if replacement is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = replacement
    return doc


def mutated_stream(frames: tuple[ProviderFrame, ...], index: int, path: tuple,
                   replacement: Any) -> list[ProviderFrame]:
    doc = orjson.loads(frames[index].body)
    body = json.dumps(mutated(doc, path, replacement), ensure_ascii=False).encode()
    return [*frames[:index], with_body(frames[index], body), *frames[index + 1:]]


def json_frames(frames: tuple[ProviderFrame, ...]) -> list[tuple[int, Any]]:
    out = []
    for index, frame in enumerate(frames):
        try:
            out.append((index, orjson.loads(frame.body)))
        except orjson.JSONDecodeError:
            continue
    return out


@st.composite
def mutations(draw: st.DrawFn, api: str) -> tuple[list[ProviderFrame], str]:
    name, frames = draw(st.sampled_from(streams(api)))
    candidates = [(i, doc) for i, doc in json_frames(frames) if paths(doc)]
    index, doc = draw(st.sampled_from(candidates))
    path = draw(st.sampled_from(paths(doc)))
    replacement = draw(st.sampled_from(_REPLACEMENTS + (_DELETE,)))
    label = f"{name} frame {index} {path} → {'(deleted)' if replacement is _DELETE else replacement!r}"
    return mutated_stream(frames, index, path, replacement), label


@pytest.mark.parametrize("api", APIS)
def test_mistyped_and_missing_fields_never_raise_and_stay_in_the_contract(api: str) -> None:
    @settings(max_examples=250, derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutations(api))
    def case(mutation: tuple[list[ProviderFrame], str]) -> None:
        frames, label = mutation
        try:
            events = run(api, frames)
        except Exception as exc:  # the contract: never
            raise AssertionError(f"{api} raised on {label}: {exc!r}") from exc
        check(api, events)

    case()


@pytest.mark.parametrize("api", APIS)
def test_every_single_mutation_of_a_small_stream(api: str) -> None:
    """Exhaustive over the smallest stream: every value of every frame, every replacement."""
    ((name, frames),) = small_streams(api, 1)
    adapter_class = ADAPTERS[api]
    count = 0
    for index, doc in json_frames(frames):
        prefix = adapter_class(RUN_ID)
        before: list[ModelEvent] = []
        for frame in frames[:index]:
            before += prefix.feed(frame)
        state = pickle.dumps(prefix)
        for path in paths(doc):
            for replacement in _REPLACEMENTS[:8] + (_DELETE,):
                stream = mutated_stream(frames, index, path, replacement)
                adapter = pickle.loads(state)
                events = list(before)
                try:
                    for frame in stream[index:]:
                        events += adapter.feed(frame)
                    events += adapter.close()
                except Exception as exc:
                    raise AssertionError(f"{api} raised on {name} frame {index} {path} → "
                                         f"{replacement!r}: {exc!r}") from exc
                check(api, events)
                count += 1
    assert count > 50


@pytest.mark.parametrize("api", APIS)
def test_a_handler_that_raises_is_one_unexpected_shape_and_the_adapter_goes_on(api: str) -> None:
    """The base's guard, whatever the adapter's own code does: the frame's events so far are
    kept, one ``unexpected_shape`` follows, and the next frames translate as without the bad
    one."""
    name, frames = small_streams(api, 1)[0]
    adapter = ADAPTERS[api](RUN_ID)
    original = adapter.handle

    def exploding(doc: Any) -> None:
        original(doc)
        raise TypeError("a field of an unexpected type")

    adapter.handle = exploding  # type: ignore[method-assign]
    first = adapter.feed(frames[0])
    assert errors(first)[-1:] == ["unexpected_shape"] and first[-1].kind == "error"
    reference = ADAPTERS[api](RUN_ID).feed(frames[0])
    assert same(first[:-1], reference), "the events before the exception are kept"
    adapter.handle = original  # type: ignore[method-assign]
    rest = []
    for frame in frames[1:]:
        rest += adapter.feed(frame)
    rest += adapter.close()
    full = run(api, frames)
    assert same(first[:-1] + rest, full)


# --- non-UTF-8, not JSON -------------------------------------------------------------------------


def _inside_first_string(body: bytes) -> bytes | None:
    at = body.find(b'":"')
    if at < 0:
        return None
    at += 3
    return body[:at] + b"\xff\xfe" + body[at:]


@pytest.mark.parametrize("api", APIS)
def test_non_utf8_bytes_are_repaired_reported_and_the_stream_goes_on(api: str) -> None:
    for name, frames in streams(api):
        for index, frame in enumerate(frames):
            broken = _inside_first_string(frame.body)
            if broken is None or index not in dict(json_frames(frames)):
                continue  # no string to break, or a body that is no JSON to begin with
            stream = [*frames[:index], with_body(frame, broken), *frames[index + 1:]]
            adapter = ADAPTERS[api](RUN_ID)
            events = []
            for position, item in enumerate(stream):
                out = adapter.feed(item)
                if position == index:
                    assert "invalid_utf8" in errors(out), (name, index, errors(out))
                    assert all(e.envelope.body == broken for e in out)  # bytes as received
                events += out
            events += adapter.close()
            check(api, events)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("body", [b"\xff\xfe\x00 garbage", b"{\"unterminated\": ", b"}{",
                                  b"\x00", b"nul", b"[1, 2", b"{\"a\": \xff"])
def test_a_body_that_is_no_json_is_malformed_frame_and_the_stream_goes_on(api: str,
                                                                          body: bytes) -> None:
    name, frames = small_streams(api, 1)[0]
    stream = [frames[0], with_body(frames[1], body), *frames[1:]]
    stream = [replace(f, frame_id=f"x:{i}") for i, f in enumerate(stream)]
    events = run(api, stream)
    check(api, events)
    bad = [e for e in events if e.source.frame_id == "x:1"]
    assert errors(bad) == ["malformed_frame"], (name, errors(bad))
    # The rest of the stream is translated as without the bad frame.
    without = run(api, [stream[0], *stream[2:]])
    assert [e.kind for e in events if e.source.frame_id != "x:1"] == [e.kind for e in without]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("body", [b"[]", b"[1, 2]", b"42", b"\"text\"", b"null", b"true",
                                  b"{}", b"[[[[[[[[[[]]]]]]]]]]", b"[{}, null]"])
def test_json_of_another_kind_never_raises(api: str, body: bytes) -> None:
    name, frames = small_streams(api, 1)[0]
    events = run(api, [frames[0], replace(with_body(frames[1], body), frame_id="odd"),
                       *frames[1:]])
    check(api, events)


# --- duplicates ----------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_frame_delivered_twice_adds_nothing(api: str) -> None:
    for name, frames in streams(api):
        once = run(api, frames)
        twice = run(api, [f for frame in frames for f in (frame, frame)])
        assert same(twice, once), name
        replayed = run(api, [*frames, *frames])  # the whole stream again, after its end
        assert same(replayed, once), name


# --- a stream cut at every byte ------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_a_stream_cut_at_every_byte_of_a_frame_ends_truncated_never_finished(api: str) -> None:
    for name, frames in small_streams(api):
        adapter_class = ADAPTERS[api]
        prefix = adapter_class(RUN_ID)
        for index, frame in enumerate(frames):
            state = pickle.dumps(prefix)
            # What the frames before the cut say when the input ends there.
            whole = pickle.loads(state).close()
            finished_before = sum(e.kind == "run.finished" for e in whole)
            truncated_before = errors(whole)[-1:] == ["stream_truncated"]
            for cut in range(len(frame.body)):
                adapter = pickle.loads(state)
                try:
                    events = adapter.feed(with_body(frame, frame.body[:cut])) + adapter.close()
                except Exception as exc:
                    raise AssertionError(f"{api} raised on {name} frame {index} cut at {cut}: "
                                         f"{exc!r}") from exc
                check(api, events)
                where = f"{name}: frame {index} cut at byte {cut}"
                assert sum(e.kind == "run.finished" for e in events) <= finished_before, (
                    f"{where}: a run.finished that did not happen")
                if truncated_before:
                    assert events and events[-1].kind == "error", where
                    assert events[-1].payload.error_type == "stream_truncated", where
            prefix.feed(frame)


@pytest.mark.parametrize("api", APIS)
def test_every_stream_without_its_terminal_frame_ends_truncated(api: str) -> None:
    for name, frames in streams(api):
        full = run(api, frames)
        if not any(e.kind in ("run.finished", "run.awaiting") for e in full):
            continue
        # Drop frames from the end until the terminal signal is gone.
        for end in range(len(frames) - 1, 0, -1):
            events = run(api, frames[:end])
            check(api, events)
            if not any(e.kind in ("run.finished", "run.awaiting") for e in events):
                assert events[-1].kind == "error", name
                assert events[-1].payload.error_type == "stream_truncated", name
                break


# --- huge deltas ---------------------------------------------------------------------------------


def _longest_string_path(doc: Any) -> tuple | None:
    best, best_len = None, -1
    for path in paths(doc):
        node = doc
        for segment in path:
            node = node[segment]
        if type(node) is str and len(node) > best_len and path[-1] not in (
                "type", "event_type", "object", "id", "role"):
            best, best_len = path, len(node)
    return best


@pytest.mark.parametrize("api", APIS)
def test_huge_values_never_raise_and_every_event_fits_a_record(api: str) -> None:
    huge = ("é" * (HOLD_BYTES // 2)) + ("x" * (3 * HOLD_BYTES))  # past the hold bound, not ASCII
    for _name, frames in small_streams(api, 3):
        for index, doc in json_frames(frames):
            path = _longest_string_path(doc)
            if path is None:
                continue
            stream = mutated_stream(frames, index, path, huge)
            events = run(api, stream)
            check(api, events)


# --- pickling mid-stream -------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
def test_pickling_the_adapter_after_every_frame_changes_nothing(api: str) -> None:
    for name, frames in streams(api):
        plain = run(api, frames)
        check(api, plain)
        assert same(run(api, frames, pickle_between=True), plain), name


@pytest.mark.parametrize("api", APIS)
def test_a_value_of_another_type_is_emptied_and_reported_never_published(api: str) -> None:
    """Whatever an adapter passes through, an event holds its declared types (base._typed)."""
    from modelevents.schemas.events import Text, Usage

    name, frames = small_streams(api, 1)[0]
    adapter = ADAPTERS[api](RUN_ID)

    def passing_through(doc: Any) -> None:
        adapter.model = {"not": "a model"}
        adapter.emit("text.delta", Text(3.5, 0, "kept", ["an", "id"]))  # type: ignore[arg-type]
        adapter.emit("usage", Usage(input_tokens=2 ** 70, server_tool_units={"x": "1"}))  # type: ignore[dict-item]

    adapter.handle = passing_through  # type: ignore[method-assign]
    events = adapter.feed(frames[0])
    assert [e.kind for e in events] == ["text.delta", "usage", "error"]
    text, usage, error = (e.payload for e in events)
    assert (text.output_index, text.text, text.item_id) == (0, "kept", None)
    assert (usage.input_tokens, usage.server_tool_units) == (None, {})
    assert error.error_type == "unexpected_shape" and "text.delta.item_id (list)" in error.message
    assert all(e.model is None for e in events) and adapter.model is None
    check(api, events)
