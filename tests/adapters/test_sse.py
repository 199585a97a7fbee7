"""adapters/sse.py: the WHATWG event-stream interpretation, at any chunking."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.adapters.errors import InputLimitError
from modelevents.adapters.limits import InputLimits, using_limits
from modelevents.adapters.sse import SSEDecoder, SSEMessage, messages_of_body

BOM = b"\xef\xbb\xbf"


def decode(body: bytes, chunks: list[int] | None = None, *,
           strict: bool = False) -> list[SSEMessage]:
    """Decode ``body`` fed in pieces cut at the given offsets (or whole)."""
    decoder = SSEDecoder(strict=strict)
    out: list[SSEMessage] = []
    last = 0
    for cut in sorted(set(chunks or [])):
        out += decoder.feed(body[last:cut])
        last = cut
    out += decoder.feed(body[last:])
    out += decoder.close()
    return out


def whole(body: bytes) -> list[SSEMessage]:
    """``messages_of_body``: the bulk path's messages of a whole body, without a decoder for
    the common shapes — the same messages as a decoder's (every test below compares them)."""
    return [SSEMessage(*fields) for fields in messages_of_body(body)]


def every_split(body: bytes) -> list[list[SSEMessage]]:
    """The body decoded whole, byte by byte, and cut at every single offset; and read whole by
    ``messages_of_body``."""
    results = [decode(body), decode(body, list(range(1, len(body)))), whole(body)]
    results += [decode(body, [cut]) for cut in range(1, len(body))]
    return results


def msg(data: bytes, event: str | None = None, id: str | None = None,
        retry: int | None = None) -> SSEMessage:
    return SSEMessage(event, data, id, retry)


# --- the spec's own examples -----------------------------------------------------------------


def test_multiline_data_is_joined_with_lf():
    body = b"data: YHOO\ndata: +2\ndata: 10\n\n"
    for result in every_split(body):
        assert result == [msg(b"YHOO\n+2\n10")]


def test_spec_example_comment_ids_and_leading_space():
    body = (b": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\n"
            b"data:  third event\n")
    # The unterminated last event: discarded by the spec, dispatched by our lenient close().
    assert decode(body, strict=True) == [msg(b"first event", id="1"), msg(b"second event", id="")]
    assert decode(body) == [msg(b"first event", id="1"), msg(b"second event", id=""),
                            msg(b" third event", id="")]


def test_spec_example_empty_data_fields():
    body = b"data\n\ndata\ndata\n\ndata:"
    assert decode(body, strict=True) == [msg(b""), msg(b"\n")]


def test_spec_example_space_after_colon_is_optional():
    body = b"data:test\n\ndata: test\n\n"
    assert decode(body) == [msg(b"test"), msg(b"test")]


# --- line endings ------------------------------------------------------------------------------


def test_cr_lf_and_crlf_line_endings_are_equivalent():
    expected = [msg(b"a", event="e"), msg(b"b\nc")]
    for nl in (b"\n", b"\r", b"\r\n"):
        body = b"event: e" + nl + b"data: a" + nl + nl + b"data: b" + nl + b"data: c" + nl + nl
        for result in every_split(body):
            assert result == expected, (nl, result)


def test_cr_at_end_of_chunk_then_lf_is_one_line_ending():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x\r") == []
    assert decoder.feed(b"\n") == []  # the LF completes the CRLF: no blank line yet
    assert decoder.feed(b"\r") == [msg(b"x")]
    assert decoder.feed(b"\ndata: y\r\n\r\n") == [msg(b"y")]


def test_mixed_line_endings_in_one_stream():
    body = b"data: a\r\n\ndata: b\r\rdata: c\n\r\n"
    for result in every_split(body):
        assert result == [msg(b"a"), msg(b"b"), msg(b"c")]


# --- fields ------------------------------------------------------------------------------------


def test_comments_unknown_fields_and_fields_without_colon():
    body = b":comment\nfoo: bar\ndata\nevent\n\n:only a comment\n\n"
    assert decode(body) == [msg(b"")]


def test_trailing_spaces_and_extra_leading_spaces_are_kept():
    body = b"event:  spaced \ndata:  two  \n\n"
    assert decode(body) == [msg(b" two  ", event=" spaced ")]


def test_only_the_first_colon_splits():
    assert decode(b"data: a: b:c\n\n") == [msg(b"a: b:c")]


def test_block_without_data_dispatches_nothing_and_resets_event():
    body = b"event: lonely\n\ndata: x\n\n"
    assert decode(body) == [msg(b"x")]


def test_empty_event_name_is_the_default_message_type():
    assert decode(b"event:\ndata: x\n\n") == [msg(b"x")]


def test_last_event_id_persists_and_can_be_reset():
    body = b"id: 7\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"
    assert decode(body) == [msg(b"a", id="7"), msg(b"b", id="7"), msg(b"c", id="")]


def test_id_containing_nul_is_ignored():
    body = b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n"
    assert decode(body) == [msg(b"a", id="1"), msg(b"b", id="1")]


def test_retry_takes_ascii_digits_only():
    decoder = SSEDecoder()
    out = decoder.feed(b"retry: 1500\ndata: a\n\nretry: 15x\ndata: b\n\n"
                       b"retry: \xd9\xa3\ndata: c\n\n")
    assert out == [msg(b"a", retry=1500), msg(b"b"), msg(b"c")]
    assert decoder.retry == 1500


def test_retry_in_a_block_without_data_applies_to_the_next_message():
    assert decode(b"retry: 10\n\ndata: x\n\n") == [msg(b"x", retry=10)]


# --- bytes -------------------------------------------------------------------------------------


def test_bom_is_stripped_once_even_when_split():
    body = BOM + b"data: x\n\n"
    for result in every_split(body):
        assert result == [msg(b"x")]
    # A second BOM is part of the field name: "\ufeffdata" is not "data".
    assert decode(BOM + BOM + b"data: x\n\n") == []


def test_multibyte_utf8_split_anywhere_is_reassembled():
    body = "event: ünï\ndata: {\"t\":\"日本語 🎉\"}\n\n".encode()
    for result in every_split(body):
        assert result == [msg('{"t":"日本語 🎉"}'.encode(), event="ünï")]


def test_invalid_utf8_in_data_is_passed_through_verbatim():
    body = b"data: {\"t\":\"\xff\xfe\x80\"}\n\n"
    assert decode(body) == [msg(b"{\"t\":\"\xff\xfe\x80\"}")]


def test_huge_event_in_many_small_chunks():
    payload = b"x" * 2_000_000
    decoder = SSEDecoder()
    body = b"data: " + payload + b"\n\n"
    out = []
    for i in range(0, len(body), 997):
        out += decoder.feed(body[i:i + 997])
    assert out == [msg(payload)]


def test_empty_chunks_and_close_twice():
    decoder = SSEDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"data: x\n") == []
    assert decoder.feed(b"") == []
    assert decoder.close() == [msg(b"x")]
    assert decoder.close() == []


def test_strict_close_discards_an_unterminated_event():
    decoder = SSEDecoder(strict=True)
    assert decoder.feed(b"data: a\n\ndata: b") == [msg(b"a")]
    assert decoder.close() == []


def test_fast_path_and_general_path_agree():
    # The same messages, once in the shapes the fast paths take, once with a comment added.
    fast = b"data: 1\n\nevent: e\ndata: 2\n\n"
    slow = b"data: 1\n:c\n\nevent: e\n:c\ndata: 2\n\n"
    assert decode(fast) == decode(slow) == [msg(b"1"), msg(b"2", event="e")]


def test_chunk_of_whole_data_events_agrees_with_the_general_path():
    # A chunk of nothing but whole one-line `data: ` events is cut in one split; one line break
    # anywhere else (a multi-line event, a run of blank lines, an unterminated end) must not be.
    cases = {
        b"data: 1\n\ndata: \n\ndata: 3\n\n": [msg(b"1"), msg(b""), msg(b"3")],
        b"data: 1\n\ndata: 2\ndata: 3\n\n": [msg(b"1"), msg(b"2\n3")],
        b"data: 1\n\n\n\ndata: 2\n\n": [msg(b"1"), msg(b"2")],
        b"data: 1\n\ndata:2\n\n": [msg(b"1"), msg(b"2")],
        b"data: 1\n\ndata: 2\n": [msg(b"1"), msg(b"2")],
        b"data: 1\n\nid: 7\n\ndata: 2\n\n": [msg(b"1"), msg(b"2", id="7")],
    }
    for body, expected in cases.items():
        for result in every_split(body):
            assert result == expected, (body, result)


def test_chunk_of_whole_event_and_data_events_agrees_with_the_general_path():
    # A chunk of nothing but `event:` + one-line `data:` events is cut by one expression whose
    # matches must tile it; any other shape anywhere in it sends the whole chunk the long way.
    cases = {
        b"event: a\ndata: 1\n\nevent:b\ndata:2\n\n": [msg(b"1", event="a"), msg(b"2", event="b")],
        b"event:  a\ndata:  1\n\n": [msg(b" 1", event=" a")],  # only one space is dropped
        b"event: \ndata: 1\n\n": [msg(b"1")],  # an empty name is the default type
        b"event: a\ndata: 1\n\n:c\n\nevent: b\ndata: 2\n\n": [msg(b"1", event="a"),
                                                            msg(b"2", event="b")],
        b"event: a\ndata: 1\ndata: 2\n\n": [msg(b"1\n2", event="a")],
        b"event: a\ndata: 1\n\nid: 9\nevent: b\ndata: 2\n\n": [msg(b"1", event="a"),
                                                               msg(b"2", event="b", id="9")],
        b"event: a\ndata: 1\n\n\n\nevent: b\ndata: 2\n\n": [msg(b"1", event="a"),
                                                          msg(b"2", event="b")],
    }
    for body, expected in cases.items():
        for result in every_split(body):
            assert result == expected, (body, result)


# --- property: any messages, any line endings, any chunking ------------------------------------

_line_text = st.binary(max_size=30).filter(lambda b: b"\r" not in b and b"\n" not in b)
_name = st.text(
    st.characters(blacklist_characters="\r\n\x00", blacklist_categories=("Cs",)),
    min_size=1, max_size=12)


@st.composite
def message_specs(draw):
    return {
        "event": draw(st.none() | _name),
        "data_lines": draw(st.lists(_line_text, min_size=1, max_size=4)),
        "id": draw(st.none() | _name | st.just("a\x00b")),
        "retry": draw(st.none() | st.integers(0, 10**9)),
        "comment": draw(st.booleans()),
    }


@st.composite
def streams(draw):
    specs = draw(st.lists(message_specs(), max_size=8))
    lines: list[bytes] = []
    for spec in specs:
        fields: list[bytes] = []
        if spec["comment"]:
            fields.append(b": keep-alive")
        if spec["event"] is not None:
            fields.append(_field(draw, b"event", spec["event"].encode()))
        if spec["id"] is not None:
            fields.append(_field(draw, b"id", spec["id"].encode()))
        if spec["retry"] is not None:
            fields.append(_field(draw, b"retry", str(spec["retry"]).encode()))
        fields += [_field(draw, b"data", line) for line in spec["data_lines"]]
        order = draw(st.permutations(range(len(fields))))
        # Data lines keep their relative order; other fields may go anywhere.
        data_fields = iter(f for f in fields if f.startswith(b"data"))
        lines += [next(data_fields) if fields[i].startswith(b"data") else fields[i] for i in order]
        lines.append(b"")  # the blank line that dispatches
    body = bytearray(BOM if draw(st.booleans()) else b"")
    previous_cr = False
    for line in lines:
        endings = [b"\n", b"\r", b"\r\n"]
        if previous_cr and not line:
            endings = [b"\r", b"\r\n"]  # CR then a lone LF would read as one CRLF
        ending = draw(st.sampled_from(endings))
        body += line + ending
        previous_cr = ending == b"\r"
    expected: list[SSEMessage] = []
    last_id = None
    for spec in specs:
        if spec["id"] is not None and "\x00" not in spec["id"]:
            last_id = spec["id"]
        expected.append(msg(b"\n".join(spec["data_lines"]), event=spec["event"], id=last_id,
                            retry=spec["retry"]))
    cuts = draw(st.lists(st.integers(0, len(body)), max_size=12))
    return bytes(body), cuts, expected


def _field(draw, name: bytes, value: bytes) -> bytes:
    # One space after the colon is optional — unless the value itself starts with a space.
    space = value[:1] == b" " or draw(st.booleans())
    return name + (b": " if space else b":") + value


@settings(max_examples=400, deadline=None)
@given(streams())
def test_any_stream_any_chunking_round_trips(case):
    body, cuts, expected = case
    assert decode(body, cuts) == expected
    assert decode(body, cuts, strict=True) == expected
    assert whole(body) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.none() | _name, _line_text), max_size=8), st.booleans())
def test_a_body_of_one_line_events_reads_the_same_whole(events, named):
    # The shapes messages_of_body cuts without a decoder: all `data:` events, all `event:` +
    # `data:` events (when every event has a name), and mixtures that must go the long way.
    body = b"".join((b"event: " + name.encode() + b"\n" if named and name else b"")
                    + b"data: " + data + b"\n\n" for name, data in events)
    assert whole(body) == decode(body) == [
        msg(data, event=name if named else None) for name, data in events]


# --- bounded (issue #11 §3): an event that never ends cannot grow the decoder without end ------

def test_an_event_without_end_is_refused_once_past_the_limit():
    decoder = SSEDecoder(max_event_bytes=10_000)
    decoder.feed(b"data: {}\n\ndata: ")
    fed = 0
    with pytest.raises(InputLimitError) as caught:
        while fed < 1_000_000:  # a stream that would never stop sending
            decoder.feed(b"x" * 1000)
            fed += 1000
    assert fed <= 10_000  # refused as soon as the pending event passed the bound
    assert caught.value.limit == "max_event_bytes"
    assert "an SSE event of 10," in str(caught.value)


def test_one_chunk_holding_a_too_long_event_is_refused_and_short_ones_pass():
    decoder = SSEDecoder(max_event_bytes=100)
    with pytest.raises(InputLimitError):
        decoder.feed(b"data: a\n\ndata: " + b"x" * 200 + b"\n\n")
    many = b"data: 0123456789\n\n" * 100  # a chunk far over the bound, every event under it
    assert len(SSEDecoder(max_event_bytes=100).feed(many)) == 100
    lines = b"".join(b"data: %d\n" % n for n in range(100)) + b"\n"  # one event of many lines
    with pytest.raises(InputLimitError):
        SSEDecoder(max_event_bytes=100).feed(lines)


def test_a_whole_body_holding_a_too_long_event_is_refused():
    with using_limits(InputLimits(max_event_bytes=100)):
        with pytest.raises(InputLimitError):
            messages_of_body(b"data: a\n\ndata: " + b"x" * 200 + b"\n\n")
        assert len(messages_of_body(b"data: 0123456789\n\n" * 100)) == 100


def test_the_bound_is_the_limit_in_effect_by_default():
    with using_limits(InputLimits(max_event_bytes=50)):
        decoder = SSEDecoder()
    assert decoder.max_event_bytes == 50
    assert SSEDecoder().max_event_bytes == 64 << 20
    with pytest.raises(InputLimitError):
        for _ in range(10):
            decoder.feed(b"data: 0123456789")
