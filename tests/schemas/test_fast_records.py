"""The hot paths that make records without calling their dataclasses (issue #12: CPython 3.11
calls a many-field dataclass through an argument tuple and a C-level ``__init__`` call) build
exactly what the classes' own constructors build — every field set, none forgotten when a field
is added to the schema.

- ``schemas.frames.stream_frames``: the frames of ``adapters/framing.frames_from_bytes``'s SSE
  path;
- ``Adapter.emit`` (adapters/base.py): every ModelEvent and its EventSource;
- the base's compiled per-record type test, which may refuse a value that fits (the exact check
  behind it then keeps it) but never passes one that does not.
"""

from __future__ import annotations

import pickle
from dataclasses import fields
from typing import Any

import orjson

from modelevents.adapters.base import Adapter, event_id_for
from modelevents.adapters.framing import frames_from_bytes
from modelevents.schemas.events import (
    Envelope,
    EventSource,
    ModelEvent,
    RunFinished,
    RunStarted,
    Text,
    Usage,
)
from modelevents.schemas.frames import ProviderFrame, stream_frames


def every_field_set(record: Any) -> None:
    """An unset slot raises AttributeError here (what a maker that forgot a field leaves)."""
    for f in fields(record):
        getattr(record, f.name)


def test_stream_frames_are_what_the_constructor_makes() -> None:
    messages = [("message_start", b'{"a":1}', None, None), (None, b"[DONE]", "ev-7", 3000)]
    frames = stream_frames(messages, 5, "s1", "run-1", "anthropic", "anthropic-messages", "sse",
                           1234, "t1")
    assert frames == [
        ProviderFrame(frame_id="s1:5", run_key="run-1", provider="anthropic",
                      api="anthropic-messages", transport="sse", received_at=1234,
                      content_type="text/event-stream", body=b'{"a":1}', tenant="t1",
                      stream_id="s1", index=5, sse_event="message_start"),
        ProviderFrame(frame_id="s1:6", run_key="run-1", provider="anthropic",
                      api="anthropic-messages", transport="sse", received_at=1234,
                      content_type="text/event-stream", body=b"[DONE]", tenant="t1",
                      stream_id="s1", index=6, cursor="ev-7"),
    ]
    for frame in frames:
        every_field_set(frame)
    assert frames[0].headers is not frames[1].headers  # each frame its own (mutable) dict


def test_frames_from_bytes_sse_frames_match_the_constructor_both_ways_of_slicing() -> None:
    body = b"event: ping\ndata: {}\n\nid: 9\ndata: [DONE]\n\n"
    expected = [
        ProviderFrame("s:0", "r", "p", "a", "sse", 7, "text/event-stream", b"{}", "t", "s", 0,
                      "ping"),
        ProviderFrame("s:1", "r", "p", "a", "sse", 7, "text/event-stream", b"[DONE]", "t", "s",
                      1, None, "9", http_status=200),
    ]
    expected[0].http_status = 200
    got = frames_from_bytes(body, run_key="r", provider="p", api="a", framing="sse",
                            stream_id="s", received_at=7, tenant="t", http_status=200)
    assert got == expected
    # A body over one slice is fed to the decoder in slices: the frames are the same.
    big = b"data: " + b"x" * 70_000 + b"\n\n" + body
    sliced = frames_from_bytes(big, run_key="r", provider="p", api="a", framing="sse",
                               stream_id="s", received_at=7, tenant="t")
    assert [f.index for f in sliced] == [0, 1, 2]
    for frame in sliced:
        every_field_set(frame)
    assert sliced[2].body == b"[DONE]" and sliced[2].cursor == "9"


class SmallAdapter(Adapter):
    """The adapters below: what they emit is their test's."""

    name = "test"
    revision = "1"
    api = "test-api"
    default_provider = "test"


class Two(SmallAdapter):
    """Emits a run.started and a text.delta for every frame, a run.finished at close."""

    name = "two"

    def handle(self, doc: Any) -> None:
        self.emit("run.started", RunStarted("in_progress", doc.get("id")))
        self.emit("text.delta", Text(0, 0, doc.get("t", ""), None))

    def finish(self) -> None:
        self.stream_complete = True
        self.emit("run.finished", RunFinished("completed", "stop"))


def test_emitted_events_are_what_the_constructors_make() -> None:
    adapter = Two("run-9", tenant="t2", model="m-1")
    [frame] = frames_from_bytes(b'id: c-3\ndata: {"id": "x", "t": "hi"}\n\n', run_key="run-9",
                                provider="test", api="test-api", framing="sse",
                                stream_id="s0", received_at=55)
    events = adapter.feed(frame)
    envelope = Envelope("text/event-stream", b'{"id": "x", "t": "hi"}')
    assert events == [
        ModelEvent(event_id_for("run-9", "s0:0", index), "run-9", "t2", "test", "test-api",
                   "m-1", kind, EventSource("s0:0", index, "sse", "c-3"), 55, "two@1",
                   envelope, payload)
        for index, (kind, payload) in enumerate([("run.started", RunStarted("in_progress", "x")),
                                                 ("text.delta", Text(0, 0, "hi", None))])
    ]
    assert events[0].envelope is events[1].envelope  # one envelope per frame, shared
    [finished] = adapter.close()
    assert finished == ModelEvent(
        event_id_for("run-9", "s0:0#close", 0), "run-9", "t2", "test", "test-api", "m-1",
        "run.finished", EventSource("s0:0#close", 0, "sse", "c-3"), 55, "two@1",
        Envelope("text/event-stream", b""), RunFinished("completed", "stop"))
    for event in [*events, finished]:
        every_field_set(event)
        every_field_set(event.source)
        assert (event.seq, event.piece, event.elided) == (-1, None, None)


def test_between_frames_there_is_nothing_to_emit_into() -> None:
    # A frame's events are a list of their own; the adapter keeps no list between frames (one
    # shared, never-appended-to stand-in), so an emit outside feed/close fails loudly.
    adapter = Two("run-9")
    [frame] = frames_from_bytes(b'data: {"id": "x"}\n\n', run_key="run-9", provider="test",
                                api="test-api", framing="sse", stream_id="s0")
    first = adapter.feed(frame)
    assert [e.kind for e in first] == ["run.started", "text.delta"]
    # An adapter unpickled between frames (a worker's state) refuses it the same way.
    for between in (adapter, pickle.loads(pickle.dumps(adapter))):
        try:
            between.emit("text.delta", Text(0, 0, "late", None))
        except RuntimeError as exc:
            assert "outside feed/close" in str(exc)
        else:
            raise AssertionError("emit between frames was accepted")
    assert [e.kind for e in first] == ["run.started", "text.delta"]  # nothing appended to it
    assert [e.kind for e in adapter.close()] == ["run.finished"]
    other = Two("run-10")  # another adapter's events are its own
    [frame2] = frames_from_bytes(b'data: {"id": "y"}\n\n', run_key="run-10", provider="test",
                                 api="test-api", framing="sse", stream_id="s0")
    assert len(other.feed(frame2)) == 2 and len(first) == 2


class Passing(SmallAdapter):
    """Passes provider numbers through into a text.delta and a usage, as adapters do."""

    value: Any = None  # what it passes through when set; else the frame's "i"

    def handle(self, doc: Any) -> None:
        value = doc["i"] if self.value is None else self.value
        self.emit("text.delta", Text(value, 0, "kept", None))
        self.emit("usage", Usage(input_tokens=value, server_tool_units={"web": value}))


def test_an_int_the_quick_type_test_does_not_take_is_still_judged_exactly() -> None:
    # The compiled per-record test lets only small ints through (its comparisons are then
    # CPython's fast ones); the exact check behind it keeps every int of the field's Avro type
    # (an "int" of 32 bits: output_index; a "long": the token counts) and empties only what is
    # beyond it, with its one error.
    def fed(value: int) -> list[Any]:
        [frame] = frames_from_bytes(orjson.dumps({"i": value}) + b"\n", run_key="run-int",
                                    provider="test", api="test-api", framing="jsonl")
        return Passing("run-int").feed(frame)

    for value in (2 ** 30, -(2 ** 30), 2 ** 31 - 1, -(2 ** 31)):
        events = fed(value)
        assert [e.kind for e in events] == ["text.delta", "usage"], value
        text, usage = (e.payload for e in events)
        assert (text.output_index, usage.input_tokens, usage.server_tool_units) == (
            value, value, {"web": value})
    for value in (2 ** 31, -(2 ** 31) - 1, 2 ** 40, 2 ** 63 - 1, -(2 ** 63)):
        events = fed(value)  # beyond an Avro int, within its long
        assert [e.kind for e in events] == ["text.delta", "usage", "error"], value
        text, usage, error = (e.payload for e in events)
        assert (text.output_index, usage.input_tokens, usage.server_tool_units) == (
            0, value, {"web": value})
        assert "text.delta.output_index (int)" in error.message
        assert "usage" not in error.message
    for value in (2 ** 63, -(2 ** 63) - 1, 2 ** 64 - 1):
        adapter = Passing("run-int")
        frame = ProviderFrame("f:0", "run-int", "test", "test-api", "poll", 0,
                              "application/json", b"{}")
        adapter.value = value  # beyond what JSON numbers give as ints here
        events = adapter.feed(frame)
        assert [e.kind for e in events] == ["text.delta", "usage", "error"], value
        text, usage, error = (e.payload for e in events)
        assert (text.output_index, usage.input_tokens, usage.server_tool_units) == (0, None, {})
        assert "text.delta.output_index (int)" in error.message


def test_the_run_hash_is_an_8_byte_blake2b_of_the_run_id_whoever_asked_before() -> None:
    # run_hash copies one prepared hasher: the copies share nothing that one run's id changes.
    import hashlib

    from modelevents.adapters.base import run_hash
    for run_id in ["run-1", "", "x" * 5000, "é-run", "run-1"]:
        assert run_hash(run_id) == hashlib.blake2b(run_id.encode(), digest_size=8).hexdigest()


class Many(SmallAdapter):
    """Emits as many text.deltas as the frame's "n"."""

    def handle(self, doc: Any) -> None:
        for _ in range(doc["n"]):
            self.emit("text.delta", Text(0, 0, "x", None))


def test_ids_past_the_table_of_index_texts_are_the_same_format() -> None:
    # Frame and event ids take small indices' text from a table (schemas/frames.INDEX_TEXT);
    # past it they are formatted: the ids read the same either side.
    body = b"".join(b'data: {"n": 0}\n\n' for _ in range(1030)) + b'data: {"n": 1030}\n\n'
    frames = frames_from_bytes(body, run_key="run-many", provider="test", api="test-api",
                               framing="sse", stream_id="s")
    assert [f.frame_id for f in frames] == [f"s:{i}" for i in range(1031)]
    events = Many("run-many").feed(frames[-1])
    assert [e.event_id for e in events] == [event_id_for("run-many", "s:1030", i)
                                            for i in range(1030)]
    assert events[1029].event_id.endswith(":s:1030:1029") and events[7].source.index == 7
