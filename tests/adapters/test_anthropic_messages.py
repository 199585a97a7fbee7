"""adapters/anthropic_messages.py on hand-written streams and hostile input.

Each fixture in tests/fixtures/anthropic-messages/ shows one behaviour the recorded corpus lacks
(named for it); its full event sequence is a reviewed snapshot, and the facts a user relies on
(text, tool calls, terminal state) are asserted beside the snapshot.
"""

from __future__ import annotations

import pickle

import orjson

from modelevents.adapters.anthropic_messages import AnthropicMessagesAdapter
from modelevents.adapters.base import stable_id
from modelevents.adapters.framing import frames_from_bytes
from modelevents.schemas.events import KIND_PAYLOAD, Elided, ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import PIECE_BYTES
from modelevents.schemas.pieces import assemble, weight
from tests import paths
from tests.helpers import feed_all, kinds, of_kind
from tests.snapshots import assert_matches_snapshot, expected_of

FIXTURES = paths.FIXTURES / "anthropic-messages"
RUN = "run-test"


# --- helpers -----------------------------------------------------------------------------------


def frames_of(name: str, **kwargs) -> list[ProviderFrame]:
    return frames_from_bytes((FIXTURES / name).read_bytes(), run_key=RUN, provider="anthropic",
                             api="anthropic-messages", **kwargs)


def run(frames: list[ProviderFrame], adapter: AnthropicMessagesAdapter | None = None
        ) -> list[ModelEvent]:
    return feed_all(adapter or AnthropicMessagesAdapter(RUN), frames)


def frame(body: bytes | str, index: int, **kwargs) -> ProviderFrame:
    if isinstance(body, str):
        body = body.encode()
    return ProviderFrame(frame_id=f"s0:{index}", run_key=RUN, provider="anthropic",
                         api="anthropic-messages", transport=kwargs.pop("transport", "sse"),
                         received_at=0, content_type="text/event-stream", body=body, index=index,
                         **kwargs)


def stream(*docs: dict | bytes) -> list[ProviderFrame]:
    return [frame(d if isinstance(d, bytes) else orjson.dumps(d), i) for i, d in enumerate(docs)]


def message_start(message_id: str = "msg_t", model: str = "claude-sonnet-4-5", **extra) -> dict:
    message = {"id": message_id, "type": "message", "role": "assistant", "model": model,
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": {"input_tokens": 10, "output_tokens": 1}}
    message.update(extra)
    return {"type": "message_start", "message": message}


def block_start(index: int, block: dict) -> dict:
    return {"type": "content_block_start", "index": index, "content_block": block}


def text_delta(index: int, text: str) -> dict:
    return {"type": "content_block_delta", "index": index,
            "delta": {"type": "text_delta", "text": text}}


def block_stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def message_end(stop_reason: str = "end_turn", output_tokens: int = 5) -> list[dict]:
    return [{"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": output_tokens}},
            {"type": "message_stop"}]


def text_stream(*texts: str) -> list[ProviderFrame]:
    return stream(message_start(), block_start(0, {"type": "text", "text": ""}),
                  *(text_delta(0, t) for t in texts), block_stop(0), *message_end())


# --- hand-written fixtures: snapshot + the facts -----------------------------------------------


def test_pause_turn_awaits_continuation_then_the_next_call_finishes():
    events = run(frames_of("pause-turn-then-continuation.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "pause-turn-then-continuation.sse"), events)
    terminal = [e for e in events if e.kind in ("run.awaiting", "run.finished")]
    assert [(e.kind, e.payload.reason) for e in terminal] == [
        ("run.awaiting", "continuation"), ("run.finished", "end_turn")]
    assert terminal[0].payload.raw_reason == "pause_turn"
    # The dangling server tool of the paused call is answered in the next call: same call id,
    # name and arguments carried over, billed once.
    (call,) = of_kind(events, "hosted.call")
    (result,) = of_kind(events, "hosted.result")
    assert (call.call_id, call.tool_type, call.arguments) == (
        "srvtoolu_hand_pause", "web_search", '{"query": "tide tables"}')
    assert (result.call_id, result.name, result.arguments, result.quantity) == (
        "srvtoolu_hand_pause", "web_search", '{"query": "tide tables"}', 1)
    assert orjson.loads(result.evidence)["sources"][0]["url"] == "https://tides.example.org/today"
    # Each provider call (re)starts the run with its own message id.
    assert [r.provider_object_id for r in of_kind(events, "run.started")] == [
        "msg_hand_pause_1", "msg_hand_pause_2"]
    assert [c.url for c in of_kind(events, "citation")] == ["https://tides.example.org/today"]
    assert of_kind(events, "usage")[-1].server_tool_units == {"web_search_requests": 1}


def test_overloaded_error_midstream_fails_the_run_retryably():
    events = run(frames_of("error-overloaded-midstream.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "error-overloaded-midstream.sse"), events)
    (error,) = of_kind(events, "error")
    # Normalized, the provider's word kept; mid-stream there is no HTTP status of its own.
    assert (error.error_type, error.code, error.http_status, error.retryable) == (
        "overloaded", "overloaded_error", None, True)
    assert events[-1].kind == "run.finished"
    assert (events[-1].payload.status, events[-1].payload.reason) == ("failed", "error")
    # The cut tool input never becomes an executable call.
    assert "tool.call" not in kinds(events)
    assert of_kind(events, "text.done")[0].text == "The answer is"


def test_model_context_window_exceeded_is_incomplete():
    events = run(frames_of("context-window-exceeded.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "context-window-exceeded.sse"), events)
    finished = events[-1].payload
    assert (events[-1].kind, finished.status, finished.reason, finished.raw_reason) == (
        "run.finished", "incomplete", "context_window_exceeded", "model_context_window_exceeded")


def test_compaction_stop_awaits_continuation_and_keeps_the_summary():
    events = run(frames_of("compaction-pause.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "compaction-pause.sse"), events)
    assert (events[-1].kind, events[-1].payload.reason) == ("run.awaiting", "continuation")
    (result,) = of_kind(events, "hosted.result")
    assert result.tool_type == "compaction"
    assert orjson.loads(result.evidence) == {
        "summary": "Summary: the user is planning a trip.",
        "encrypted_content": "opaque-compaction"}


def test_unknown_event_and_block_types_become_unknown_and_the_stream_goes_on():
    events = run(frames_of("unknown-event-and-block.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "unknown-event-and-block.sse"), events)
    unknown = [e for e in events if e.kind == "unknown"]
    assert [u.payload.provider_type for u in unknown] == [
        "content_block_hint", "content_block:hologram", "content_block_delta:hologram_delta"]
    assert b'"hint":"a future event type"' in unknown[0].envelope.body  # envelope kept verbatim
    assert of_kind(events, "text.done")[0].text == "Still here."
    assert (events[-1].kind, events[-1].payload.status) == ("run.finished", "completed")


def test_truncated_stream_ends_with_stream_truncated_never_finished():
    events = run(frames_of("truncated-in-tool-input.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "truncated-in-tool-input.sse"), events)
    assert events[-1].kind == "error"
    assert events[-1].payload.error_type == "stream_truncated"
    assert "run.finished" not in kinds(events) and "run.awaiting" not in kinds(events)
    assert "tool.call" not in kinds(events)  # half a transfer_funds call is not a call


def test_malformed_frame_is_reported_and_the_stream_goes_on():
    events = run(frames_of("malformed-frame.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "malformed-frame.sse"), events)
    (error,) = of_kind(events, "error")
    assert error.error_type == "malformed_frame" and "s0:3" in error.message
    assert of_kind(events, "text.done")[0].text == "one two"
    assert (events[-1].kind, events[-1].payload.status) == ("run.finished", "completed")


def test_a_text_delta_whose_text_is_no_string_is_malformed_and_the_block_goes_on():
    bad = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 5}}
    frames = text_stream("one ", "two")
    events = run([*frames[:3], frame(orjson.dumps(bad), 90), *frames[3:]])
    (error,) = of_kind(events, "error")
    assert error.error_type == "malformed_frame"
    assert "content_block_delta lacks or mistypes" in error.message
    assert "text_delta.text is int" in error.message
    assert of_kind(events, "text.done")[0].text == "one two"
    assert (events[-1].kind, events[-1].payload.status) == ("run.finished", "completed")


def test_duplicate_message_start_for_the_open_message_is_ignored():
    events = run(frames_of("duplicate-message-start.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "duplicate-message-start.sse"), events)
    assert kinds(events).count("message.started") == 1
    assert "error" not in kinds(events)
    assert of_kind(events, "text.done")[0].text == "Hi."


def test_invalid_tool_arguments_are_kept_and_flagged():
    events = run(frames_of("tool-call-invalid-arguments.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "tool-call-invalid-arguments.sse"), events)
    (call,) = of_kind(events, "tool.call")
    assert (call.tool_name, call.tool_call_id, call.arguments, call.arguments_valid) == (
        "get_weather", "toolu_hand_bad", '{"city": "Oslo",}', False)
    assert (events[-1].kind, events[-1].payload.reason) == ("run.awaiting", "tool_results")


def test_error_body_translates_with_its_http_status():
    frames = frames_of("error-body-rate-limit.json", http_status=429)
    assert frames[0].transport == "poll"
    events = run(frames)
    assert_matches_snapshot(expected_of(FIXTURES / "error-body-rate-limit.json"), events)
    assert kinds(events) == ["error", "run.finished"]
    error = events[0].payload
    assert (error.error_type, error.http_status, error.retryable, error.code) == (
        "rate_limited", 429, True, "rate_limit_error")
    assert "req_hand_0001" in error.message  # the request id, for support
    assert events[1].payload.status == "failed"


def test_complete_message_translates_hosted_code_execution_and_container_upload():
    events = run(frames_of("message-code-execution-container-upload.json"))
    recording = FIXTURES / "message-code-execution-container-upload.json"
    assert_matches_snapshot(expected_of(recording), events)
    assert kinds(events)[0] == "run.started" and kinds(events)[-1] == "run.finished"
    upload, execution = of_kind(events, "hosted.result")
    assert (upload.name, upload.call_id) == ("container_upload", "file_hand_data_csv")
    assert orjson.loads(execution.evidence) == {
        "stdout": "(3, 2)\n", "stderr": "", "return_code": 0, "files": ["file_hand_plot_png"]}
    (call,) = of_kind(events, "hosted.call")
    assert orjson.loads(call.arguments)["code"].startswith("import pandas")
    assert "tool.call" not in kinds(events)  # provider-executed: never a client tool call
    assert of_kind(events, "text.done")[0].text == "The file has 3 rows and 2 columns."
    usage = of_kind(events, "usage")[-1]
    assert (usage.input_tokens, usage.cache_write_tokens, usage.cache_read_tokens,
            usage.output_tokens, usage.total_tokens) == (1600, 100, 300, 80, 1680)


def test_complete_message_citations_of_documents_and_search_results():
    events = run(frames_of("message-citations-documents.json"))
    assert_matches_snapshot(expected_of(FIXTURES / "message-citations-documents.json"), events)
    citations = of_kind(events, "citation")
    assert [(c.output_index, c.source_type, c.title) for c in citations] == [
        (1, "document", "Staff handbook"), (1, "document", "Policy PDF"),
        (2, "search_result", "HR leave policy")]
    assert citations[2].url == "https://intranet.example.com/hr/leave"
    assert "".join(t.text for t in of_kind(events, "text.done")) == (
        "According to the handbook, leave requests need two weeks' notice, "
        "and the search result agrees.")


# --- hostile input -----------------------------------------------------------------------------


def test_duplicated_frames_emit_nothing_the_second_time():
    frames = text_stream("a", "b")
    adapter = AnthropicMessagesAdapter(RUN)
    once = []
    for f in frames:
        once += adapter.feed(f)
        assert adapter.feed(f) == []  # same frame_id again, e.g. a retried delivery
    once += adapter.close()
    assert kinds(once) == kinds(run(text_stream("a", "b")))
    assert of_kind(once, "text.done")[0].text == "ab"


def test_non_utf8_frame_body_is_repaired_reported_and_the_stream_goes_on():
    frames = text_stream("ok ", "fine")
    bad = frame(b'{"type":"content_block_delta","index":0,'
                b'"delta":{"type":"text_delta","text":"\xff\xfe"}}', 99)
    events = run(frames[:3] + [bad] + frames[3:])
    (error,) = of_kind(events, "error")
    assert error.error_type == "invalid_utf8"
    # The bad bytes become U+FFFD where they stood; the envelope keeps them as received.
    assert of_kind(events, "text.done")[0].text == "ok \ufffd\ufffdfine"
    assert events[-1].kind == "run.finished"


def test_json_that_is_not_an_object_is_malformed():
    events = run(text_stream("x")[:1] + [frame(b"[1, 2]", 50), frame(b'"ping"', 51)])
    assert [e.payload.error_type for e in events if e.kind == "error"][:2] == [
        "malformed_frame", "malformed_frame"]


def test_known_frame_missing_required_fields_is_malformed_not_a_crash():
    events = run(stream(message_start(), {"type": "content_block_start", "index": 0},
                        {"type": "content_block_delta", "index": 0}, *message_end()))
    errors = of_kind(events, "error")
    assert [e.error_type for e in errors] == ["malformed_frame", "malformed_frame"]
    assert (events[-1].kind, events[-1].payload.status) == ("run.finished", "completed")


def test_delta_for_a_block_never_started_is_a_protocol_violation():
    events = run(stream(message_start(), text_delta(3, "lost"), block_stop(3), *message_end()))
    assert [e.error_type for e in of_kind(events, "error")] == [
        "protocol_violation", "protocol_violation"]
    assert "text.delta" not in kinds(events)


def test_delta_of_the_wrong_type_for_its_block_is_a_protocol_violation():
    events = run(stream(message_start(), block_start(0, {"type": "tool_use", "id": "toolu_x",
                                                         "name": "f", "input": {}}),
                        text_delta(0, "not json"), block_stop(0), *message_end("tool_use")))
    assert of_kind(events, "error")[0].error_type == "protocol_violation"
    assert of_kind(events, "tool.call")[0].arguments == "{}"


def test_empty_deltas_emit_nothing():
    events = run(stream(
        message_start(),
        block_start(0, {"type": "text", "text": ""}), text_delta(0, ""), text_delta(0, "x"),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_e", "name": "f", "input": {}}),
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": ""}},
        block_stop(1), *message_end("tool_use")))
    assert [t.text for t in of_kind(events, "text.delta")] == ["x"]
    assert "tool.call.delta" not in kinds(events)
    assert of_kind(events, "tool.call")[0].arguments == "{}"  # empty input is "{}", never ""


def test_huge_delta_passes_through_whole_and_its_done_event_refers_to_the_deltas():
    huge = "é" * 2_000_000
    events = run(text_stream("<", huge, ">"))
    assert max(weight(e) for e in events) <= PIECE_BYTES + 3  # cut to fit Kafka records
    events = assemble(events)
    assert of_kind(events, "text.delta")[1].text == huge
    # 4 MB is more than the run's state holds: the done event names the deltas that rebuild it.
    done = next(e for e in events if e.kind == "text.done")
    assert done.payload.text == "" and done.elided == Elided("text", "text.delta", 4_000_002)
    assert "".join(p.text for p in of_kind(events, "text.delta")) == "<" + huge + ">"


def test_event_ids_are_deterministic_and_unique():
    first = run(frames_of("pause-turn-then-continuation.sse"))
    second = run(frames_of("pause-turn-then-continuation.sse"))
    assert [e.event_id for e in first] == [e.event_id for e in second]
    assert len({e.event_id for e in first}) == len(first)
    for event in first:  # every payload is the record its kind names
        assert type(event.payload) is KIND_PAYLOAD[event.kind]


def test_state_survives_pickling_mid_stream():
    frames = frames_of("pause-turn-then-continuation.sse")
    whole = run(frames)
    adapter = AnthropicMessagesAdapter(RUN)
    events = []
    for f in frames[:7]:  # inside the first message, a server tool block open
        events += adapter.feed(f)
    adapter = pickle.loads(pickle.dumps(adapter))
    events = events + run(frames[7:], adapter)
    assert [(e.event_id, e.kind, e.payload) for e in events] == [
        (e.event_id, e.kind, e.payload) for e in whole]


def test_missing_tool_id_is_synthesized_stably():
    def once() -> str:
        events = run(stream(message_start("msg_noid"),
                            block_start(0, {"type": "tool_use", "name": "f", "input": {"a": 1}}),
                            block_stop(0), *message_end("tool_use")))
        (call,) = of_kind(events, "tool.call")
        return call.tool_call_id
    assert once() == once() == stable_id(RUN, "msg_noid", 0, "f")


def test_usage_from_message_delta_replaces_field_by_field():
    events = run(stream(
        message_start(usage={"input_tokens": 43, "cache_read_input_tokens": 7, "output_tokens": 1}),
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"input_tokens": 61, "output_tokens": 2}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
         "usage": {"output_tokens": 9, "output_tokens_details": {"thinking_tokens": 4}}},
        {"type": "message_stop"}))
    snapshots = [(u.input_tokens, u.cache_read_tokens, u.output_tokens, u.reasoning_tokens)
                 for u in of_kind(events, "usage")]
    # Absolute each time: 61 replaces 43 (plus the 7 cached), 9 replaces 2 — nothing is added.
    assert snapshots == [(50, 7, 1, None), (68, 7, 2, None), (68, 7, 9, 4)]


def test_unknown_stop_reason_fails_safe():
    events = run(stream(message_start(), *message_end("teleported")))
    assert of_kind(events, "unknown")[0].provider_type == "stop_reason:teleported"
    finished = of_kind(events, "run.finished")[0]
    assert (finished.status, finished.reason, finished.raw_reason) == (
        "incomplete", "unknown", "teleported")


def test_thinking_form_follows_the_model():
    def form(model: str) -> str:
        events = run(stream(
            message_start(model=model),
            block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "thinking_delta", "thinking": "hmm"}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "signature_delta", "signature": "sig"}},
            block_stop(0), *message_end()))
        (done,) = of_kind(events, "reasoning.done")
        assert (done.signature, done.valid_for) == ("sig", f"anthropic/{model}")
        return done.form
    assert form("claude-3-7-sonnet-20250219") == "raw"  # 3.7 streams its full thinking
    assert form("claude-sonnet-4-5-20250929") == "summary"


def test_recognizes_its_own_shapes_only():
    recognizes = AnthropicMessagesAdapter.recognizes
    assert recognizes(message_start())
    assert recognizes(text_delta(0, "x"))
    assert recognizes({"type": "message", "role": "assistant", "content": [], "stop_reason": None})
    assert recognizes({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    assert not recognizes({"type": "ping"})  # too generic to decide on
    assert not recognizes({"type": "response.output_text.delta", "delta": "x"})
    assert not recognizes({"type": "error", "code": "server_error", "message": "x",
                           "sequence_number": 3})
    assert not recognizes({"object": "chat.completion.chunk", "choices": []})
    assert not recognizes({"type": "message", "role": "assistant",
                           "content": [{"type": "output_text", "text": "x"}]})
    assert not recognizes([1, 2])


# --- issue #12 --------------------------------------------------------------------------------


def test_compaction_usage_reports_the_billed_totals_over_the_iterations():
    # Under server-side compaction the final usage's top-level numbers are the last iteration's
    # only; what is billed is the sum over usage.iterations[], per token kind.
    events = run(frames_of("compaction-usage-iterations.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "compaction-usage-iterations.sse"), events)
    final = of_kind(events, "usage")[-1]
    # input counts all input (fresh + cache writes + cache reads), as everywhere
    assert (final.input_tokens, final.output_tokens, final.cache_read_tokens,
            final.cache_write_tokens, final.total_tokens) == (
        48210 + 20000 + 530 + 1200, 402 + 214, 20000, 1200, 69940 + 616)
    assert orjson.loads(final.iterations) == [
        {"type": "compaction", "input_tokens": 68210, "output_tokens": 402,
         "cache_read_tokens": 20000, "cache_write_tokens": 0},
        {"type": "message", "input_tokens": 1730, "output_tokens": 214,
         "cache_read_tokens": 0, "cache_write_tokens": 1200}]
    assert of_kind(events, "usage")[0].iterations is None  # message_start: no breakdown yet
    assert [p.text for p in of_kind(events, "text.done")] == ["Next, move the invoice code."]
    assert kinds(events)[-1] == "run.finished"


def test_malformed_iterations_are_reported_and_the_top_level_usage_kept():
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"input_tokens": 30, "output_tokens": 7, "iterations": {"type": "message"}}}
    events = run(stream(message_start(), delta, {"type": "message_stop"}))
    (bad,) = of_kind(events, "error")
    assert bad.error_type == "malformed_frame" and "usage.iterations" in bad.message
    final = of_kind(events, "usage")[-1]
    assert (final.input_tokens, final.output_tokens, final.iterations) == (30, 7, None)
    assert kinds(events)[-1] == "run.finished"


def test_a_redacted_advisor_result_keeps_its_encrypted_content_as_evidence():
    use = block_start(0, {"type": "server_tool_use", "id": "srvtoolu_adv", "name": "advisor",
                          "input": {}})
    result = block_start(1, {"type": "advisor_tool_result", "tool_use_id": "srvtoolu_adv",
                             "content": {"type": "advisor_redacted_result",
                                         "encrypted_content": "EoYBCkB-advice",
                                         "stop_reason": "end_turn"}})
    delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 4}}
    events = run(stream(message_start(), use, {"type": "content_block_stop", "index": 0},
                        result, {"type": "content_block_stop", "index": 1}, delta,
                        {"type": "message_stop"}))
    (hosted,) = of_kind(events, "hosted.result")
    assert (hosted.tool_type, hosted.call_id, hosted.is_error) == ("advisor", "srvtoolu_adv", False)
    assert orjson.loads(hosted.evidence) == {
        "type": "advisor_redacted_result", "encrypted_content": "EoYBCkB-advice",
        "stop_reason": "end_turn", "redacted": True}


def test_a_refusal_keeps_the_recommended_model():
    details = {"type": "refusal", "category": "cyber", "explanation": "Blocked under policy.",
               "recommended_model": "claude-fable-5"}
    delta = {"type": "message_delta", "delta": {"stop_reason": "refusal",
                                                "stop_details": details},
             "usage": {"output_tokens": 0}}
    events = run(stream(message_start(), delta, {"type": "message_stop"}))
    (refusal,) = of_kind(events, "refusal")
    assert (refusal.text, refusal.category, refusal.explanation) == (
        "Blocked under policy.", "cyber",
        "Blocked under policy. (recommended model: claude-fable-5)")
    bare = {**details, "explanation": None}
    events = run(stream(message_start(), {**delta, "delta": {"stop_reason": "refusal",
                                                              "stop_details": bare}},
                        {"type": "message_stop"}))
    assert of_kind(events, "refusal")[0].explanation == "(recommended model: claude-fable-5)"
