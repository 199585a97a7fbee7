"""adapters/framing.py: detection and frame cutting for sse, jsonl, json-array and json."""

from __future__ import annotations

import gzip

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.adapters.errors import InputLimitError
from modelevents.adapters.framing import JSONArraySplitter, detect_framing, frames_from_bytes
from modelevents.adapters.limits import InputLimits, using_limits
from modelevents.schemas.errors import FramingError
from tests.corpus import corpus_files, corpus_id, require_corpus


def cut(body: bytes, framing: str = "auto", **kw):
    return frames_from_bytes(body, run_key="run-1", provider="openai", api="openai-chat",
                             framing=framing, **kw)


# --- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("body, framing", [
    (b'data: {"a":1}\n\n', "sse"),
    (b'event: message_start\ndata: {"a":1}\n\n', "sse"),
    (b': comment first\ndata: {}\n\n', "sse"),
    (b'\xef\xbb\xbf\r\n\r\nid: 1\r\ndata: {}\r\n\r\n', "sse"),
    (b'data\n\n', "sse"),
    (b'{"a":1}\n{"a":2}\n', "jsonl"),
    (b'{"a":1}\r\n\r\n{"a":2}', "jsonl"),
    (b'{not json}\n{"a":2}\n', "jsonl"),  # a malformed first line does not hide the others
    (b'[{"a":1}\n,\r\n{"a":2}]', "json-array"),
    (b'  [\n  {"a": 1}\n]\n', "json-array"),
    (b'{"error": {"code": 400}}', "json"),
    (b'{\n  "error": {\n    "code": 429\n  }\n}\n', "json"),  # pretty-printed object
    (b'{"a":1}\n', "json"),  # one line is one object
    (b'{\n  "cut": "short', "json"),  # a broken object: the adapter reports it
])
def test_detect_framing(body, framing):
    assert detect_framing(body) == framing


@pytest.mark.parametrize("body", [b"", b"  \r\n\t", b"\xef\xbb\xbf"])
def test_empty_body_is_a_framing_error(body):
    with pytest.raises(FramingError, match="empty"):
        detect_framing(body)


@pytest.mark.parametrize("body", [
    b"<html><body>502 Bad Gateway</body></html>",
    b"hello world\n",
    b"\xff\xfe\x00d\x00a\x00t\x00a",  # UTF-16: not something providers send
])
def test_unreadable_body_is_a_clear_framing_error(body):
    with pytest.raises(FramingError, match="none of the framings") as info:
        detect_framing(body)
    assert repr(body[:10])[2:-1][:6] in str(info.value)  # shows the first bytes


def test_gzip_body_says_so():
    with pytest.raises(FramingError, match="gzip-compressed"):
        detect_framing(gzip.compress(b"data: {}\n\n"))


def test_unknown_framing_name():
    with pytest.raises(FramingError, match="unknown framing 'xml'"):
        cut(b"{}", framing="xml")


# --- sse ---------------------------------------------------------------------------------------


def test_sse_frames_carry_event_cursor_and_verbatim_data():
    body = (b"id: 41\nevent: response.created\ndata: {\"x\": 1}\n\n"
            b"event: ping\ndata: {}\n\ndata: [DONE]\n")
    frames = cut(body, stream_id="s7", received_at=123)
    assert [f.frame_id for f in frames] == ["s7:0", "s7:1", "s7:2"]
    assert [f.index for f in frames] == [0, 1, 2]
    assert [f.body for f in frames] == [b'{"x": 1}', b"{}", b"[DONE]"]
    assert [f.sse_event for f in frames] == ["response.created", "ping", None]
    assert [f.cursor for f in frames] == ["41", "41", "41"]  # lastEventId persists
    frame = frames[0]
    assert (frame.run_key, frame.provider, frame.api, frame.transport, frame.received_at,
            frame.content_type, frame.stream_id, frame.tenant) == (
        "run-1", "openai", "openai-chat", "sse", 123, "text/event-stream", "s7", "default")


def test_sse_non_utf8_data_is_kept_byte_for_byte():
    frames = cut(b'data: {"t":"\xc3\x28\xff"}\n\n')
    assert frames[0].body == b'{"t":"\xc3\x28\xff"}'


def test_same_bytes_same_frames():
    body = b"data: {}\n\ndata: {}\n\n"
    assert cut(body) == cut(body)


# --- jsonl -------------------------------------------------------------------------------------


def test_jsonl_one_frame_per_non_blank_line():
    body = b'\xef\xbb\xbf{"a":1}\r\n\r\n  {"a":2}  \n{"a":\n'
    frames = cut(body)
    assert [f.body for f in frames] == [b'{"a":1}', b'{"a":2}', b'{"a":']
    assert [f.frame_id for f in frames] == ["s0:0", "s0:1", "s0:2"]
    assert {f.content_type for f in frames} == {"application/json"}
    assert {f.sse_event for f in frames} == {None}


def test_jsonl_keeps_non_utf8_lines():
    frames = cut(b'{"a":1}\n{"t":"\xff"}\n', framing="jsonl")
    assert frames[1].body == b'{"t":"\xff"}'


# --- json-array --------------------------------------------------------------------------------

GEMINI_ARRAY = (
    b'[{\n  "candidates": [\n    {"content": {"parts": [{"text": "a ] } [ {"}]}}\n  ]\n}\n'
    b',\r\n{\n  "candidates": [{"content": {"parts": [{"text": "quote \\" and \\\\"}]}}]\n}\n'
    b',\r\n{"usageMetadata": {"totalTokenCount": 3}}\n]'
)


def test_json_array_elements_spanning_lines_are_cut_verbatim():
    frames = cut(GEMINI_ARRAY)
    assert len(frames) == 3
    docs = [orjson.loads(f.body) for f in frames]
    assert docs[0]["candidates"][0]["content"]["parts"][0]["text"] == "a ] } [ {"
    assert docs[1]["candidates"][0]["content"]["parts"][0]["text"] == 'quote " and \\'
    assert docs[2] == {"usageMetadata": {"totalTokenCount": 3}}
    assert frames[0].body == GEMINI_ARRAY[1:GEMINI_ARRAY.index(b"\n,")]  # verbatim slice
    assert {f.transport for f in frames} == {"sse"}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, len(GEMINI_ARRAY)), max_size=20))
def test_json_array_any_chunking_gives_the_same_elements(cuts):
    splitter = JSONArraySplitter()
    out: list[bytes] = []
    last = 0
    for point in sorted(cuts):
        out += splitter.feed(GEMINI_ARRAY[last:point])
        last = point
    out += splitter.feed(GEMINI_ARRAY[last:]) + splitter.close()
    assert out == [f.body for f in cut(GEMINI_ARRAY)]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(max_size=8),
    lambda inner: (st.lists(inner, max_size=3)
                   | st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=10)


@settings(max_examples=200, deadline=None)
@given(st.lists(_json_values, max_size=6), st.data())
def test_json_array_of_any_values(values, data):
    body = orjson.dumps(values, option=orjson.OPT_INDENT_2)
    splitter = JSONArraySplitter()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
    out: list[bytes] = []
    last = 0
    for point in cuts:
        out += splitter.feed(body[last:point])
        last = point
    out += splitter.feed(body[last:]) + splitter.close()
    assert [orjson.loads(element) for element in out] == values


def test_json_array_truncated_element_comes_out_at_close():
    frames = cut(b'[{"a": 1},\n{"b": [1, 2')
    assert [f.body for f in frames] == [b'{"a": 1}', b'{"b": [1, 2']


def test_json_array_malformed_element_does_not_lose_the_rest():
    frames = cut(b'[{"a": tru}, {"b": 2}]')
    assert [f.body for f in frames] == [b'{"a": tru}', b'{"b": 2}']


def test_json_array_empty_and_trailing_whitespace():
    assert cut(b"[]\n", framing="json-array") == []
    assert cut(b"[ ]  \r\n", framing="json-array") == []


def test_json_array_errors_name_the_bytes():
    with pytest.raises(FramingError, match="JSON array was expected"):
        cut(b'{"a": 1}', framing="json-array")
    with pytest.raises(FramingError, match="after the end of the JSON array"):
        cut(b'[{"a": 1}] trailing', framing="json-array")


# --- json --------------------------------------------------------------------------------------


def test_json_object_is_one_poll_frame():
    body = b'{\n  "error": {"message": "bad", "code": "invalid"}\n}\n'
    frames = cut(body, http_status=400)
    assert len(frames) == 1
    frame = frames[0]
    assert frame.body == body.strip()
    assert (frame.transport, frame.frame_id, frame.content_type, frame.http_status) == (
        "poll", "s0:0", "application/json", 400)


def test_json_object_keeps_an_explicit_transport():
    assert cut(b'{"id": "evt"}', transport="webhook")[0].transport == "webhook"


def test_json_object_with_invalid_utf8_is_still_one_frame():
    frames = cut(b'{"t": "\xff"}\n\n', framing="json")
    assert frames[0].body == b'{"t": "\xff"}'


# --- the recorded corpus -----------------------------------------------------------------------

RECORDINGS = [p for provider in ("anthropic", "gemini", "openai") for p in corpus_files(provider)
              if p.suffix != ".yaml"]


@pytest.mark.corpus
@pytest.mark.parametrize("path", RECORDINGS, ids=corpus_id)
def test_every_recording_frames_into_json_documents(path):
    require_corpus()
    frames = cut(path.read_bytes())
    assert frames
    bad = []
    for frame in frames:
        try:
            orjson.loads(frame.body)
        except orjson.JSONDecodeError:
            bad.append(frame.body)
    # [DONE] is Chat Completions' sentinel, not a document.
    broken = [body[:80] for body in bad if body != b"[DONE]"]
    assert len(broken) == KNOWN_BROKEN.get(path.name, 0), broken


# Synthetic fixtures that really hold invalid JSON: their adapter must report `malformed_frame`.
KNOWN_BROKEN = {"parallel-tool-call-wrapper.1.chunks.txt": 2}  # lines 1 and 6 miss closing braces


# --- bounded (issue #11 §3): no frame over max_event_bytes ------------------------------------

def test_an_array_element_without_end_is_refused_once_past_the_limit():
    splitter = JSONArraySplitter(max_element_bytes=10_000)
    assert splitter.feed(b'[{"a": 1}, {"b": "') == [b'{"a": 1}']
    fed = 0
    with pytest.raises(InputLimitError, match="a JSON array element of"):
        while fed < 1_000_000:
            splitter.feed(b"x" * 1000)
            fed += 1000
    assert fed <= 10_000


@pytest.mark.parametrize("body, what", [
    (b"data: x\n\ndata: " + b"y" * 300 + b"\n\n", "an SSE event of"),
    (b'{"a": 1}\n{"b": "' + b"y" * 300 + b'"}\n', "a JSON line of"),
    (b'[{"a": 1}, {"b": "' + b"y" * 300 + b'"}]', "a JSON array element of"),
    (b'{"b": "' + b"y" * 300 + b'"}', "a JSON object of"),
    (b'{\n "b": "' + b"y" * 300 + b'"\n}', "a JSON object of"),
], ids=["sse", "jsonl", "json-array", "json", "json-pretty"])
def test_a_frame_over_the_limit_is_refused_in_every_framing(body, what):
    with using_limits(InputLimits(max_event_bytes=200), source="big.txt"):
        with pytest.raises(InputLimitError) as caught:
            frames_from_bytes(body, run_key="r", provider="", api="")
    assert str(caught.value).startswith(f"big.txt: {what}")
    assert len(frames_from_bytes(body, run_key="r", provider="", api="")) >= 1  # default: read
