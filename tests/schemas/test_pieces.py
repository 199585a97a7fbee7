"""Events and frames too large for one Kafka record: cut into pieces and joined again exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.schemas import codec
from modelevents.schemas.errors import IncompletePieces
from modelevents.schemas.events import Envelope, EventSource, Media, ModelEvent, Text, ToolCall
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import MAX_RECORD_BYTES, PIECE_BYTES
from modelevents.schemas.pieces import (
    FrameAssembler,
    PieceAssembler,
    assemble,
    join_pieces,
    split_event,
    split_events,
    split_frame,
    weight,
)


def _event(payload, body: bytes = b"{}", kind: str = "text.done") -> ModelEvent:
    return ModelEvent("h:f1:0", "run-1", "t", "openai", "openai-chat", "m", kind,
                      EventSource("f1", 0, "sse"), 1_700_000_000_000, "openai_chat@1",
                      Envelope("application/json", body), payload)


def test_an_event_that_fits_is_not_cut_and_the_list_is_the_same_object():
    events = [_event(Text(0, 0, "hello"))]
    assert split_events(events) is events
    assert split_event(events[0]) == events


def test_a_15_mb_text_travels_in_pieces_each_under_the_record_limit_and_joins_exactly():
    text = ("é漢字🙂abc" * 3_000_000)[:7_000_000]  # 15 MB, multi-byte characters at every cut
    event = _event(Text(0, 0, text), body=b'{"delta":"x"}')
    pieces = split_event(event)
    assert len(pieces) >= weight(event) // PIECE_BYTES + 1 > 19
    assert [p.piece.index for p in pieces] == list(range(len(pieces)))
    assert {p.piece.count for p in pieces} == {len(pieces)}
    assert pieces[0].event_id == event.event_id and pieces[3].event_id == f"{event.event_id}~3"
    for piece in pieces:
        assert weight(piece) <= PIECE_BYTES + 3
        assert len(codec.encode(piece)) <= MAX_RECORD_BYTES
    whole = join_pieces([codec.decode(codec.encode(p)) for p in pieces])
    assert whole == event


def test_small_fields_stay_whole_in_the_first_piece_and_bytes_are_cut_too():
    event = _event(ToolCall(2, "get_weather", "call_1", '{"a":"' + "x" * 2_000_000 + '"}'),
                   kind="tool.call", body=b"B" * 1_500_000)
    pieces = split_event(event)
    assert pieces[0].payload.tool_name == "get_weather"
    assert all(p.payload.tool_name == "" for p in pieces[1:])
    assert all(p.payload.output_index == 2 for p in pieces)
    assert join_pieces(pieces) == event
    image = _event(Media(0, "image/png", data=bytes(range(256)) * 40_000), kind="media.done")
    assert join_pieces(split_event(image)) == image


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=300), data=st.binary(max_size=300), budget=st.integers(4, 64))
def test_split_then_join_is_the_identity_at_any_budget(text, data, budget):
    event = _event(ToolCall(0, "f" + text[:3], "c", text), kind="tool.call", body=data)
    pieces = split_event(event, budget)
    assert all(weight(p) <= budget + 3 for p in pieces)
    assert (join_pieces(pieces) if len(pieces) > 1 else pieces[0]) == event
    assert assemble(pieces) == [event]


def test_missing_or_reordered_pieces_are_refused_with_what_was_got():
    pieces = split_event(_event(Text(0, 0, "x" * 100), body=b""), 10)
    with pytest.raises(IncompletePieces, match=r"expected pieces 0\.\.9 "):
        join_pieces(pieces[:5] + pieces[6:])
    assembler = PieceAssembler()
    assert assembler.feed(pieces[0]) is None
    with pytest.raises(IncompletePieces, match="ended after 1 of its 10 pieces"):
        assembler.feed(_event(Text(0, 0, "next")))


def test_a_frame_too_large_for_one_record_is_cut_and_assembled_even_when_resent():
    frame = ProviderFrame("s0:7", "run-1", "openai", "openai-responses", "sse", 1,
                          "application/json", b"z" * 2_500_000, stream_id="s0", index=7)
    pieces = split_frame(frame)
    assert len(pieces) == 4 and all(len(codec.encode(p)) <= MAX_RECORD_BYTES for p in pieces)
    assembler = FrameAssembler()
    assert assembler.add(pieces[0]) is None and assembler.add(pieces[1]) is None
    # The producer started over (a resend): the collected pieces are replaced.
    got = [assembler.add(codec.decode(codec.encode(p))) for p in pieces]
    assert got[:3] == [None, None, None] and got[3] == frame
    assert not assembler.open
    assert split_frame(ProviderFrame("f", "r", "p", "a", "sse", 1, "c", b"small")) == [
        ProviderFrame("f", "r", "p", "a", "sse", 1, "c", b"small")]
