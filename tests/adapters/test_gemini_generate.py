"""adapters/gemini_generate.py on hand-written streams (tests/fixtures/gemini-generate/) and
hostile input. The recorded corpus is in tests/conformance/test_gemini_generate_corpus.py."""

from __future__ import annotations

import pickle

import orjson
import pytest

from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.gemini_generate import GeminiGenerateAdapter
from modelevents.schemas.events import Elided, ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import PIECE_BYTES
from modelevents.schemas.pieces import assemble, weight
from tests import paths
from tests.helpers import feed_all
from tests.snapshots import assert_matches_snapshot, expected_of

FIXTURES = paths.FIXTURES / "gemini-generate"
API = "gemini-generate"


def frames(body: bytes, *, framing: str = "auto", stream_id: str = "s0",
           http_status: int | None = None) -> list[ProviderFrame]:
    return frames_from_bytes(body, run_key="run-1", provider="google", api=API, framing=framing,
                             stream_id=stream_id, http_status=http_status)


def normalize(body: bytes, *, run_id: str = "run-1", framing: str = "auto",
              http_status: int | None = None) -> list[ModelEvent]:
    return feed_all(GeminiGenerateAdapter(run_id),
                    frames(body, framing=framing, http_status=http_status))


def fixture(name: str) -> list[ModelEvent]:
    return normalize((FIXTURES / name).read_bytes())


def of(events: list[ModelEvent], kind: str) -> list:
    return [e.payload for e in events if e.kind == kind]


def chunk(*parts: dict, finish: str | None = None, rid: str = "r1", **extra) -> bytes:
    candidate: dict = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return orjson.dumps({"candidates": [candidate], "modelVersion": "gemini-2.5-flash",
                         "responseId": rid, **extra})


def raw_frame(body: bytes, index: int, stream_id: str = "s0") -> ProviderFrame:
    return ProviderFrame(f"{stream_id}:{index}", "run-1", "google", API, "sse", 0,
                         "text/event-stream", body, stream_id=stream_id, index=index)


def feed_bodies(bodies: list[bytes], run_id: str = "run-1", close: bool = True) -> list[ModelEvent]:
    adapter = GeminiGenerateAdapter(run_id)
    events: list[ModelEvent] = []
    for index, body in enumerate(bodies):
        events += adapter.feed(raw_frame(body, index))
    return events + (adapter.close() if close else [])


# --- reviewed snapshots of every hand-written stream ---------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir()))
def test_fixture_matches_reviewed_snapshot(name: str) -> None:
    assert_matches_snapshot(expected_of(FIXTURES / name), fixture(name))


# --- the facts a user relies on, asserted beside the snapshots ------------------------------------


def test_text_stream_reassembles_text_and_finishes_completed() -> None:
    events = fixture("text-stream.sse")
    assert "".join(t.text for t in of(events, "text.delta")) == "Hello, wörld!"
    assert [t.text for t in of(events, "text.done")] == ["Hello, wörld!"]
    assert events[0].kind == "run.started"
    assert events[0].payload.provider_object_id == "resp-text"
    assert events[-1].kind == "run.finished"
    assert (events[-1].payload.status, events[-1].payload.reason) == ("completed", "end_turn")
    (usage,) = of(events, "usage")  # once, at the end: the last snapshot
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens,
            usage.cache_read_tokens) == (7, 4, 11, 2)
    assert all(e.model == "gemini-2.5-flash" for e in events)


def test_thought_summary_is_reasoning_and_signatures_stay_with_their_part() -> None:
    events = fixture("thought-summary-then-text.sse")
    summary = [r for r in of(events, "reasoning.done") if r.form == "summary"]
    assert [r.text for r in summary] == ["**Planning**\n\nI will count. Then answer."]
    assert "".join(t.text for t in of(events, "text.done")) == "Three."
    signatures = [r for r in of(events, "reasoning.done") if r.signature]
    assert [r.signature for r in signatures] == ["c2lnLXRleHQ=", "c2lnLWVuZA=="]
    text_index = of(events, "text.done")[0].output_index
    assert all(r.output_index == text_index for r in signatures)  # both sat on the text part
    assert all(r.valid_for == "google/gemini-2.5-flash" for r in signatures)
    assert of(events, "usage")[-1].reasoning_tokens == 30


def test_parallel_function_calls_get_stable_distinct_ids_and_await_tool_results() -> None:
    events = fixture("tool-call-parallel.json-array")
    calls = of(events, "tool.call")
    assert [(c.tool_name, orjson.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_weather", {"city": "Zürich", "unit": "C"}),
        ("get_time", {}),
    ]
    ids = [c.tool_call_id for c in calls]
    assert all(ids) and len(set(ids)) == 3
    assert all(c.arguments_valid for c in calls)
    assert ids == [c.tool_call_id for c in of(fixture("tool-call-parallel.json-array"), "tool.call")]
    # The Gemini 3 signature on the first call is tied to that call.
    (signature,) = [r for r in of(events, "reasoning.done") if r.signature]
    assert signature.item_id == ids[0] and signature.output_index == calls[0].output_index
    assert events[-1].kind == "run.awaiting"
    assert (events[-1].payload.reason, events[-1].payload.raw_reason) == ("tool_results", "STOP")
    assert not of(events, "run.finished")


def test_tool_call_ids_depend_on_the_run() -> None:
    body = (FIXTURES / "tool-call-parallel.json-array").read_bytes()
    ids_a = [c.tool_call_id for c in of(normalize(body, run_id="run-a"), "tool.call")]
    ids_b = [c.tool_call_id for c in of(normalize(body, run_id="run-b"), "tool.call")]
    assert ids_a == [c.tool_call_id for c in of(normalize(body, run_id="run-a"), "tool.call")]
    assert not set(ids_a) & set(ids_b)


def test_function_call_with_provider_id_keeps_it() -> None:
    events = feed_bodies([chunk({"functionCall": {"id": "fc-7", "name": "f", "args": {"a": 1}}},
                                finish="STOP")])
    (call,) = of(events, "tool.call")
    assert (call.tool_call_id, call.arguments) == ("fc-7", '{"a":1}')


def test_streamed_partial_args_reassemble_into_whole_json() -> None:
    events = fixture("tool-call-streamed-args.sse")
    plan, book = of(events, "tool.call")
    assert orjson.loads(plan.arguments) == {
        "trip": {"city": 'New York "NY"', "stops": [{"day": 1, "museum": True},
                                                    {"day": 2.5, "museum": None}]},
        "travellers": 2}
    # The terminal {} was missing for `book`: the finishReason closed it.
    assert (book.tool_name, orjson.loads(book.arguments)) == ("book", {"ref": "A1"})
    for call in (plan, book):
        deltas = [d.arguments for d in of(events, "tool.call.delta")
                  if d.tool_call_id == call.tool_call_id]
        assert "".join(deltas) == call.arguments  # the fragments are the JSON text, in order
        assert call.arguments_valid is True
    assert [s.tool_call_id for s in of(events, "tool.call.started")] == [plan.tool_call_id,
                                                                          book.tool_call_id]
    assert events[-1].kind == "run.awaiting"


def test_unplaceable_partial_arg_is_reported_and_marks_arguments_invalid() -> None:
    events = feed_bodies([
        chunk({"functionCall": {"name": "f", "willContinue": True}}),
        chunk({"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}],
                                "willContinue": True}}),
        # $.a is a string now; a member below it contradicts that.
        chunk({"functionCall": {"partialArgs": [{"jsonPath": "$.a.b", "numberValue": 1}]}}),
        chunk({"text": ""}, finish="STOP"),
    ])
    (call,) = of(events, "tool.call")
    assert call.arguments == '{"a":"x"}' and call.arguments_valid is False
    assert [e.error_type for e in of(events, "error")] == ["malformed_tool_arguments"]


def test_code_execution_is_hosted_never_a_tool_call() -> None:
    events = fixture("code-execution.sse")
    assert not of(events, "tool.call") and not of(events, "tool.call.started")
    calls, results = of(events, "hosted.call"), of(events, "hosted.result")
    assert [c.tool_type for c in calls + results] == ["code_execution"] * 4
    assert all(h.executor == "provider" and h.authority == "provider" for h in calls + results)
    # Without ids, results pair with their code part in order.
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert [orjson.loads(c.arguments)["code"] for c in calls] == ["print(6*7)", "1/0"]
    assert [(r.status, r.is_error) for r in results] == [("completed", False), ("failed", True)]
    assert orjson.loads(results[0].evidence) == {"outcome": "OUTCOME_OK", "output": "42\n"}
    assert [t.text for t in of(events, "text.done")] == ["Let me compute.", "The answer is 42."]
    usage = of(events, "usage")[-1]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (120, 30, 150)


def test_grounding_citations_have_character_spans() -> None:
    events = fixture("grounding-citations.sse")
    (text,) = of(events, "text.done")
    citations = of(events, "citation")
    assert len(citations) == 3  # one per (support, source)
    for citation in citations:
        assert citation.output_index == text.output_index
        # Segment offsets are UTF-8 bytes; spans are characters of the text.
        assert text.text[citation.start:citation.end] == citation.cited_text
    assert [c.url for c in citations] == ["https://example.com/a", "https://example.com/a",
                                          "https://example.org/b"]
    assert {c.source_type for c in citations} == {"url"}


def test_grounding_search_is_a_hosted_web_search() -> None:
    events = fixture("grounding-citations.sse")
    (call,), (result,) = of(events, "hosted.call"), of(events, "hosted.result")
    assert (call.tool_type, call.call_id) == ("web_search", result.call_id)
    assert (result.billable_unit, result.quantity) == ("search_query", 1)
    evidence = orjson.loads(result.evidence)
    assert evidence["queries"] == ["cafe opening hours"]
    assert [s["uri"] for s in evidence["sources"]] == ["https://example.com/a",
                                                       "https://example.org/b"]


def test_blocked_prompt_is_a_refusal_and_finishes_content_filter() -> None:
    events = fixture("prompt-blocked.json")
    (refusal,) = of(events, "refusal")
    assert refusal.category == "PROHIBITED_CONTENT"
    assert events[-1].kind == "run.finished"
    assert (events[-1].payload.status, events[-1].payload.reason,
            events[-1].payload.raw_reason) == ("incomplete", "content_filter", "PROHIBITED_CONTENT")
    assert not of(events, "error")


def test_safety_finish_refuses_with_the_blocked_category() -> None:
    events = fixture("finish-safety.sse")
    (refusal,) = of(events, "refusal")
    assert refusal.category == "HARM_CATEGORY_DANGEROUS_CONTENT"
    assert (events[-1].payload.status, events[-1].payload.reason) == ("incomplete",
                                                                      "content_filter")


def test_malformed_function_call_fails_with_the_finish_message() -> None:
    events = fixture("malformed-function-call.json")
    (error,) = of(events, "error")
    assert (error.error_type, error.code) == ("tool_call_error", "MALFORMED_FUNCTION_CALL")
    assert "get_weather" in error.message
    assert (events[-1].kind, events[-1].payload.status) == ("run.finished", "failed")


def test_max_tokens_is_incomplete() -> None:
    events = fixture("max-tokens.json")
    assert (events[-1].payload.status, events[-1].payload.reason) == ("incomplete", "max_tokens")
    assert events[0].source.transport == "poll"  # a whole object is a poll response


def test_inline_data_and_file_data_are_media() -> None:
    events = fixture("inline-image.json")
    image, video = of(events, "media.done")
    assert (image.mime_type, image.data) == ("image/png", b"\x89PNG\r\n\x1a\n")
    assert (video.mime_type, video.uri, video.data) == ("video/mp4", "gs://bucket/clip.mp4", None)


def test_error_chunk_mid_stream_fails_the_run() -> None:
    events = fixture("error-mid-stream.sse")
    (error,) = of(events, "error")
    assert (error.error_type, error.code, error.http_status, error.retryable) == (
        "overloaded", "UNAVAILABLE", 503, True)
    assert events[-1].kind == "run.finished" and events[-1].payload.status == "failed"
    assert not of(events, "text.done")  # the partial text is never declared done


def test_http_error_body_carries_status_and_retry_delay() -> None:
    body = orjson.dumps({"error": {
        "code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}]}})
    events = normalize(body, http_status=429)
    (error,) = of(events, "error")
    assert (error.error_type, error.code, error.http_status, error.retryable) == (
        "rate_limited", "RESOURCE_EXHAUSTED", 429, True)
    assert "retry after 12s" in error.message
    assert [e.kind for e in events] == ["error", "run.finished"]


def test_client_error_is_not_retryable() -> None:
    body = orjson.dumps({"error": {"code": 400, "message": "Bad key", "status": "INVALID_ARGUMENT"}})
    (error,) = of(normalize(body, http_status=400), "error")
    assert (error.error_type, error.code, error.retryable) == (
        "invalid_request", "INVALID_ARGUMENT", False)


def test_unknown_part_is_kept_and_the_stream_goes_on() -> None:
    events = fixture("unknown-part.sse")
    (unknown,) = of(events, "unknown")
    assert unknown.provider_type == "part:hologram"
    assert b"hologram" in [e for e in events if e.kind == "unknown"][0].envelope.body
    assert [t.text for t in of(events, "text.done")] == ["Before", " after."]
    assert events[-1].payload.status == "completed"


def test_object_that_is_no_response_is_unknown() -> None:
    events = feed_bodies([b'{"type": "interaction.created"}'])
    assert events[0].kind == "unknown" and events[0].payload.provider_type.startswith("response:")
    assert events[-1].payload.error_type == "stream_truncated"


def test_unknown_finish_reason_is_kept_raw_and_never_completed() -> None:
    events = feed_bodies([chunk({"text": "hi"}, finish="SOLAR_FLARE")])
    assert of(events, "unknown")[0].provider_type == "finishReason:SOLAR_FLARE"
    # The closed vocabulary's fallback, never a "normalized" value made of the raw string.
    assert (events[-1].payload.status, events[-1].payload.reason,
            events[-1].payload.raw_reason) == ("incomplete", "other", "SOLAR_FLARE")


# --- hostile input -------------------------------------------------------------------------------


def test_malformed_json_frame_is_an_error_and_the_stream_goes_on() -> None:
    events = feed_bodies([chunk({"text": "a"}), b'{"candidates": [', chunk({"text": "b"},
                                                                            finish="STOP")])
    (error,) = of(events, "error")
    assert error.error_type == "malformed_frame"
    assert [t.text for t in of(events, "text.done")] == ["ab"]
    assert events[-1].kind == "run.finished"


def test_non_utf8_frame_is_repaired_reported_and_translated() -> None:
    broken = chunk({"text": "b@@c"}).replace(b"@@", b"\xff\xfe")  # bytes no UTF-8 decoder reads
    events = feed_bodies([chunk({"text": "a"}), broken, chunk({"text": "d"}, finish="STOP")])
    assert [e.error_type for e in of(events, "error")] == ["invalid_utf8"]
    assert [t.text for t in of(events, "text.done")] == ["ab\ufffd\ufffdcd"]
    assert events[-1].payload.status == "completed"


def test_non_utf8_frame_that_is_no_json_even_repaired_is_malformed() -> None:
    events = feed_bodies([chunk({"text": "a"}), b'{"candidates": \xff\xfe',
                          chunk({"text": "b"}, finish="STOP")])
    assert [e.error_type for e in of(events, "error")] == ["malformed_frame"]
    assert events[-1].payload.status == "completed"


def test_mistyped_members_are_unexpected_shape_not_a_crash() -> None:
    events = feed_bodies([b'{"candidates": [{"content": {"parts": "oops"}}]}',
                          b'{"candidates": [{"content": {"parts": [{"text": 5}]}}]}',
                          b'[1, 2]', chunk({"text": "ok"}, finish="STOP")])
    assert [e.error_type for e in of(events, "error")] == [
        "unexpected_shape", "unexpected_shape", "malformed_frame", "malformed_frame"]
    assert events[-1].payload.status == "completed"


def test_duplicated_frames_emit_nothing_twice() -> None:
    adapter = GeminiGenerateAdapter("run-1")
    first = raw_frame(chunk({"text": "once"}), 0)
    assert [e.kind for e in adapter.feed(first)] == ["run.started", "message.started",
                                                     "text.delta"]
    assert adapter.feed(first) == []
    adapter.feed(raw_frame(chunk({"text": ""}, finish="STOP"), 1))
    assert adapter.feed(raw_frame(chunk({"text": ""}, finish="STOP"), 1)) == []


def test_truncated_stream_ends_with_stream_truncated_never_finished() -> None:
    body = (FIXTURES / "tool-call-streamed-args.sse").read_bytes()
    cut = frames(body)[:4]  # inside the first streamed call
    adapter = GeminiGenerateAdapter("run-1")
    events = [e for f in cut for e in adapter.feed(f)] + adapter.close()
    assert events[-1].kind == "error" and events[-1].payload.error_type == "stream_truncated"
    assert not of(events, "run.finished") and not of(events, "run.awaiting")
    assert not of(events, "tool.call")  # partial arguments never become an executable call
    assert of(events, "tool.call.delta")  # what did arrive is kept


def test_truncated_text_stream_reports_the_last_usage_before_the_cut() -> None:
    events = feed_bodies([chunk({"text": "a"}, usageMetadata={"promptTokenCount": 3,
                                                             "totalTokenCount": 3})])
    assert [e.kind for e in events][-2:] == ["usage", "error"]
    assert not of(events, "text.done")


def test_empty_text_emits_nothing_and_a_huge_delta_passes_whole() -> None:
    huge = "x" * 5_000_000
    events = feed_bodies([chunk({"text": ""}), chunk({"text": huge}), chunk({"text": ""},
                                                                            finish="STOP")])
    assert max(weight(e) for e in events) <= PIECE_BYTES + 3  # cut to fit Kafka records
    events = assemble(events)
    assert [t.text for t in of(events, "text.delta")] == [huge]
    done = next(e for e in events if e.kind == "text.done")
    assert done.payload.text == "" and done.elided == Elided("text", "text.delta", 5_000_000)


def test_unary_object_translates_like_the_stream() -> None:
    streamed = fixture("text-stream.sse")
    whole = orjson.dumps({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hello, wörld!"}]},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 4, "totalTokenCount": 11,
                          "cachedContentTokenCount": 2},
        "modelVersion": "gemini-2.5-flash", "responseId": "resp-text"})
    unary = normalize(whole, framing="json")
    assert [e.kind for e in unary] == ["run.started", "message.started", "text.delta",
                                       "text.done", "message.finished", "usage", "run.finished"]
    assert of(unary, "text.done") == of(streamed, "text.done")
    assert of(unary, "usage") == of(streamed, "usage")
    assert of(unary, "run.finished") == of(streamed, "run.finished")


def test_whole_streamed_array_in_one_body() -> None:
    body = (FIXTURES / "tool-call-parallel.json-array").read_bytes()
    as_one = normalize(body, framing="json")
    split = normalize(body, framing="json-array")
    assert [(e.kind, e.payload) for e in as_one] == [(e.kind, e.payload) for e in split]


def test_next_provider_call_of_the_run_continues_it() -> None:
    adapter = GeminiGenerateAdapter("run-1")
    events: list[ModelEvent] = []
    first = [chunk({"functionCall": {"name": "f", "args": {}}}, finish="STOP", rid="r1")]
    second = [chunk({"text": "done"}, rid="r2"), chunk({"text": ""}, finish="STOP", rid="r2")]
    for index, body in enumerate(first + second):
        events += adapter.feed(raw_frame(body, index))
    events += adapter.close()
    assert [e.kind for e in events if e.kind.startswith("run.")] == [
        "run.started", "run.awaiting", "run.started", "run.finished"]
    started = of(events, "message.started")
    assert [(m.output_index, m.item_id) for m in started] == [(0, "r1"), (1, "r2")]
    assert of(events, "text.done")[0].output_index == 0  # output indexes restart per call
    assert events[-1].payload.status == "completed"


def test_event_ids_are_deterministic() -> None:
    body = (FIXTURES / "code-execution.sse").read_bytes()
    first, second = normalize(body), normalize(body)
    assert [e.event_id for e in first] == [e.event_id for e in second]
    assert len({e.event_id for e in first}) == len(first)


def test_state_survives_pickling_mid_stream() -> None:
    all_frames = frames((FIXTURES / "tool-call-streamed-args.sse").read_bytes())
    straight = GeminiGenerateAdapter("run-1")
    expected = [e for f in all_frames for e in straight.feed(f)] + straight.close()
    adapter = GeminiGenerateAdapter("run-1")
    events = [e for f in all_frames[:5] for e in adapter.feed(f)]
    adapter = pickle.loads(pickle.dumps(adapter))
    events += [e for f in all_frames[5:] for e in adapter.feed(f)] + adapter.close()
    assert [(e.event_id, e.kind, e.payload) for e in events] == [
        (e.event_id, e.kind, e.payload) for e in expected]


def test_recognizes_generate_content_and_nothing_else() -> None:
    recognizes = GeminiGenerateAdapter.recognizes
    assert recognizes(orjson.loads(chunk({"text": "a"})))
    assert recognizes({"promptFeedback": {"blockReason": "SAFETY"}})
    assert recognizes([orjson.loads(chunk({"text": "a"}))])
    assert not recognizes({"type": "message_start"})
    assert not recognizes({"choices": []})
    assert not recognizes({"error": {"code": 429}})
    assert not recognizes("text")


def test_signature_on_a_thought_part_completes_that_reasoning_block() -> None:
    events = feed_bodies([
        chunk({"text": "step one", "thought": True, "thoughtSignature": "czE="}),
        chunk({"text": " step two", "thought": True, "thoughtSignature": "czI="}),
        chunk({"text": "answer"}, finish="STOP"),
    ])
    summary = [r for r in of(events, "reasoning.done") if r.form == "summary"]
    assert [(r.text, r.signature) for r in summary] == [("step one step two", "czE=")]
    redacted = [r for r in of(events, "reasoning.done") if r.form == "redacted"]
    assert [(r.signature, r.output_index) for r in redacted] == [("czI=", summary[0].output_index)]


def test_google_maps_is_maps_search_and_its_grounding_chunk_a_place() -> None:
    # The same names as the Interactions adapter (schemas/vocabulary.py; issue #12 drift).
    events = fixture("maps-grounding.sse")
    assert {h.tool_type for h in of(events, "hosted.call") + of(events, "hosted.result")} == {
        "maps_search"}
    assert of(events, "hosted.call")[0].name == "GOOGLE_MAPS"  # the raw tool type kept
    (citation,) = of(events, "citation")
    assert (citation.source_type, citation.url, citation.title) == (
        "place", "https://maps.google.com/?cid=1", "Kranzler Eck")
    # Offsets are UTF-8 bytes on the wire ("ü" is two), characters on the event.
    assert (citation.start, citation.end) == (0, len("Kranzler Eck is on Kurfürstendamm."))


def test_unknown_server_tool_type_is_other_with_its_raw_name() -> None:
    events = feed_bodies([chunk({"toolCall": {"toolType": "GOOGLE_TELEPORT", "id": "t1"}}),
                          chunk({"text": "ok"}, finish="STOP")])
    (call,) = of(events, "hosted.call")
    assert (call.tool_type, call.name) == ("other", "GOOGLE_TELEPORT")


def test_unknown_grounding_chunk_is_an_other_citation() -> None:
    grounding = {"groundingChunks": [{"hologram": {"uri": "x"}}], "groundingSupports": [
        {"segment": {"startIndex": 0, "endIndex": 2}, "groundingChunkIndices": [0]}]}
    body = orjson.loads(chunk({"text": "hi"}, finish="STOP"))
    body["candidates"][0]["groundingMetadata"] = grounding
    (citation,) = of(feed_bodies([orjson.dumps(body)]), "citation")
    assert citation.source_type == "other"


def test_a_signature_before_the_model_is_known_is_valid_for_the_provider_not_none() -> None:
    body = orjson.dumps({"candidates": [{"content": {"parts": [
        {"text": "hi", "thoughtSignature": "c2ln"}]}, "finishReason": "STOP", "index": 0}]})
    (signed,) = of(feed_bodies([body]), "reasoning.done")
    assert (signed.signature, signed.valid_for) == ("c2ln", "google")  # was "google/None"
