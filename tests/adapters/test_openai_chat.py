"""adapters/openai_chat.py against hand-written streams (tests/fixtures/openai-chat/) and hostile
input. The recorded corpus is in tests/conformance/test_openai_chat_corpus.py."""

from __future__ import annotations

import pickle

import orjson
import pytest

from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.openai_chat import OpenAIChatAdapter
from modelevents.schemas.events import Elided, ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import PIECE_BYTES
from modelevents.schemas.pieces import assemble, weight
from tests import paths
from tests.helpers import feed_all, kinds, of_kind, text_of
from tests.snapshots import assert_matches_snapshot, expected_of

FIXTURES = paths.FIXTURES / "openai-chat"
RUN = "run-chat"


def frames_of(name: str, *, stream_id: str = "s0", http_status: int | None = None,
              transport: str = "sse") -> list[ProviderFrame]:
    return frames_from_bytes((FIXTURES / name).read_bytes(), run_key=RUN, provider="openai",
                             api="openai-chat", stream_id=stream_id, http_status=http_status,
                             transport=transport)


def normalize(frames: list[ProviderFrame], adapter: OpenAIChatAdapter | None = None
              ) -> list[ModelEvent]:
    return feed_all(adapter or OpenAIChatAdapter(RUN), frames)


def chunk(delta: dict | None = None, finish: str | None = None, index: int = 0,
          **extra) -> bytes:
    choices = [] if delta is None else [{"index": index, "delta": delta,
                                         "finish_reason": finish}]
    return orjson.dumps({"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1,
                         "model": "gpt-4o-mini", "choices": choices, **extra})


def frame(body: bytes, n: int) -> ProviderFrame:
    return ProviderFrame(f"s0:{n}", RUN, "openai", "openai-chat", "sse", 0, "text/event-stream",
                         body)


def stream(*bodies: bytes) -> list[ProviderFrame]:
    return [frame(body, n) for n, body in enumerate(bodies)]


# --- fixtures: facts beside the reviewed snapshot ------------------------------------------


def test_tool_calls_without_ids_get_stable_distinct_ids():
    events = normalize(frames_of("tool-call-no-ids.sse"))
    calls = of_kind(events, "tool.call")
    assert [(c.tool_name, c.arguments, c.arguments_valid) for c in calls] == [
        ("lookup", '{"q":"a"}', True), ("lookup", '{"q":"b"}', True)]
    ids = [c.tool_call_id for c in calls]
    assert len(set(ids)) == 2 and all(i.startswith("mev_") for i in ids)
    again = of_kind(normalize(frames_of("tool-call-no-ids.sse")), "tool.call")
    assert [c.tool_call_id for c in again] == ids  # same input, same ids
    other_run = OpenAIChatAdapter("another-run")
    assert [c.tool_call_id for c in of_kind(normalize(frames_of("tool-call-no-ids.sse"),
                                                      other_run), "tool.call")] != ids
    # started / delta / call agree on the id
    assert {p.tool_call_id for p in of_kind(events, "tool.call.started")} == set(ids)
    assert {p.tool_call_id for p in of_kind(events, "tool.call.delta")} == set(ids)
    assert of_kind(events, "run.awaiting")[0].reason == "tool_results"
    assert_matches_snapshot(expected_of(FIXTURES / "tool-call-no-ids.sse"), events)


def test_invalid_tool_arguments_are_kept_and_flagged():
    events = normalize(frames_of("tool-call-invalid-arguments.sse"))
    [call] = of_kind(events, "tool.call")
    assert call.arguments == '{"query": "unterminated' and call.arguments_valid is False
    assert (call.tool_name, call.tool_call_id) == ("search", "call_bad")
    finished = of_kind(events, "run.finished")[0]
    assert (finished.status, finished.reason, finished.raw_reason) == (
        "incomplete", "max_tokens", "length")
    assert_matches_snapshot(expected_of(FIXTURES / "tool-call-invalid-arguments.sse"), events)


def test_malformed_frame_is_an_error_and_the_stream_goes_on():
    events = normalize(frames_of("malformed-frame.sse"))
    [error] = of_kind(events, "error")
    assert error.error_type == "malformed_frame"
    assert text_of(events) == "Hello world"
    assert events[-1].kind == "run.finished" and events[-1].payload.status == "completed"
    assert_matches_snapshot(expected_of(FIXTURES / "malformed-frame.sse"), events)


def test_unknown_object_and_delta_field_are_kept_once():
    frames = frames_of("unknown-object.sse")
    events = normalize(frames)
    unknown = [e for e in events if e.kind == "unknown"]
    assert [u.payload.provider_type for u in unknown] == [
        "chat.completion.heartbeat", "delta.audio"]  # delta.audio twice, reported once
    assert unknown[0].envelope.body == frames[1].body  # the provider frame kept verbatim
    assert text_of(events) == "Hi!"
    assert events[-1].kind == "run.finished"
    assert_matches_snapshot(expected_of(FIXTURES / "unknown-object.sse"), events)


def test_truncated_stream_ends_with_stream_truncated_never_finished():
    events = normalize(frames_of("truncated.sse"))
    assert events[-1].kind == "error" and events[-1].payload.error_type == "stream_truncated"
    assert not {"run.finished", "run.awaiting", "tool.call", "message.finished"} & set(
        kinds(events))
    # The text part closed when the tool call began; the cut call is never reported whole.
    assert [p.text for p in of_kind(events, "text.done")] == ["The answer is"]
    assert_matches_snapshot(expected_of(FIXTURES / "truncated.sse"), events)


def test_finish_reason_without_done_completes_the_stream():
    events = normalize(frames_of("finished-without-done.jsonl"))
    assert "error" not in kinds(events)
    assert events[-1].kind == "run.finished" and events[-1].payload.status == "completed"
    assert events[-1].source.frame_id.endswith("#close")
    assert_matches_snapshot(expected_of(FIXTURES / "finished-without-done.jsonl"), events)


def test_azure_filtered_choice_is_a_content_filter_refusal():
    events = normalize(frames_of("azure-content-filtered.jsonl"))
    [refusal] = of_kind(events, "refusal")
    assert refusal.category == "content_filter" and "violence" in refusal.explanation
    assert refusal.output_index == 0
    finished = of_kind(events, "run.finished")[0]
    assert (finished.status, finished.reason) == ("incomplete", "content_filter")
    # Azure's first chunk (empty id, no choices) does not start the run; the next one does.
    assert of_kind(events, "run.started")[0].provider_object_id == "chatcmpl-filtered"
    assert_matches_snapshot(expected_of(FIXTURES / "azure-content-filtered.jsonl"), events)


def test_azure_prompt_filter_blocks_the_run():
    frames = frames_of("azure-prompt-filtered.jsonl") + [frame(b"[DONE]", 9)]
    events = normalize(frames)
    [refusal] = of_kind(events, "refusal")
    assert refusal.category == "content_filter" and "jailbreak" in refusal.explanation
    finished = of_kind(events, "run.finished")[0]
    assert (finished.status, finished.reason) == ("incomplete", "content_filter")


def test_reasoning_content_then_text():
    events = normalize(frames_of("reasoning-then-text.sse"))
    [done] = of_kind(events, "reasoning.done")
    assert (done.form, done.text) == ("raw", "Two plus two is four.")
    assert events.index(next(e for e in events if e.kind == "reasoning.done")) < \
        events.index(next(e for e in events if e.kind == "text.delta"))
    assert [p.text for p in of_kind(events, "text.done")] == ["4"]
    [usage] = of_kind(events, "usage")
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens,
            usage.total_tokens) == (12, 9, 7, 21)  # DeepSeek counts reasoning inside
    assert_matches_snapshot(expected_of(FIXTURES / "reasoning-then-text.sse"), events)


def test_reasoning_sent_under_both_names_counts_once():
    events = normalize(frames_of("reasoning-both-names.sse"))
    [done] = of_kind(events, "reasoning.done")
    assert done.text == "Think. Done."
    assert_matches_snapshot(expected_of(FIXTURES / "reasoning-both-names.sse"), events)


def test_refusal_deltas_become_one_refusal():
    events = normalize(frames_of("refusal.sse"))
    [refusal] = of_kind(events, "refusal")
    assert refusal.text == "I can't help with that." and refusal.output_index == 0
    assert "text.delta" not in kinds(events)
    finished = of_kind(events, "run.finished")[0]
    assert (finished.status, finished.reason, finished.raw_reason) == (
        "completed", "refusal", "stop")
    assert_matches_snapshot(expected_of(FIXTURES / "refusal.sse"), events)


def test_error_inside_a_chunk_fails_the_run():
    events = normalize(frames_of("mid-stream-error-in-chunk.sse"))
    [error] = of_kind(events, "error")
    assert error.http_status == 502 and error.retryable and "Provider" in error.message
    finished = [e for e in events if e.kind == "run.finished"]
    assert len(finished) == 1 and finished[0].payload.status == "failed"
    assert_matches_snapshot(expected_of(FIXTURES / "mid-stream-error-in-chunk.sse"), events)


def test_http_error_body():
    events = normalize(frames_of("http-error-rate-limit.json", http_status=429))
    assert kinds(events) == ["error", "run.finished"]
    error = events[0].payload
    assert (error.code, error.http_status, error.retryable) == ("rate_limit_exceeded", 429, True)
    assert events[0].source.transport == "poll"
    assert (events[1].payload.status, events[1].payload.raw_reason) == (
        "failed", "rate_limit_exceeded")
    assert_matches_snapshot(expected_of(FIXTURES / "http-error-rate-limit.json"), events)


def test_vllm_error_object():
    events = normalize(frames_of("vllm-error-object.json"))
    assert kinds(events) == ["error", "run.finished"]
    error = events[0].payload
    assert (error.error_type, error.code, error.http_status, error.retryable) == (
        "invalid_request", "BadRequestError", 400, False)


def test_complete_object_translates_like_a_stream():
    events = normalize(frames_of("completion-tool-calls.json"))
    assert kinds(events)[0] == "run.started" and "error" not in kinds(events)
    assert [p.text for p in of_kind(events, "text.done")] == ["Checking both cities."]
    assert [(c.tool_call_id, c.arguments) for c in of_kind(events, "tool.call")] == [
        ("call_paris", '{"city":"Paris"}'), ("call_rome", '{"city":"Rome"}')]
    [usage] = of_kind(events, "usage")
    assert (usage.cache_read_tokens, usage.total_tokens) == (64, 120)
    assert events[-1].kind == "run.awaiting"
    assert_matches_snapshot(expected_of(FIXTURES / "completion-tool-calls.json"), events)


def test_search_annotations_become_citations():
    events = normalize(frames_of("completion-search-annotations.json"))
    [citation] = of_kind(events, "citation")
    text = of_kind(events, "text.done")[0].text
    assert text[citation.start:citation.end] == "kafka.apache.org"
    assert (citation.url, citation.source_type) == ("https://kafka.apache.org/blog", "url")


def test_choices_keep_their_output_index_and_the_worst_ending_wins():
    events = normalize(frames_of("n2-mixed-finish.sse"))
    assert (text_of(events, 0), text_of(events, 1)) == ("Yes", "Well, it")
    assert [p.output_index for p in of_kind(events, "message.finished")] == [0, 1]
    finished = of_kind(events, "run.finished")[0]
    assert (finished.status, finished.reason) == ("incomplete", "max_tokens")
    assert_matches_snapshot(expected_of(FIXTURES / "n2-mixed-finish.sse"), events)


def test_tool_calls_ending_with_stop_await_results():
    events = normalize(frames_of("tool-calls-finish-stop.sse"))
    [awaiting] = of_kind(events, "run.awaiting")
    assert (awaiting.reason, awaiting.raw_reason) == ("tool_results", "stop")
    assert "run.finished" not in kinds(events)


def test_legacy_function_call():
    events = normalize(frames_of("function-call-legacy.sse"))
    [call] = of_kind(events, "tool.call")
    assert (call.tool_name, call.arguments, call.arguments_valid) == (
        "get_time", '{"tz":"UTC"}', True)
    assert call.tool_call_id.startswith("mev_")
    assert of_kind(events, "run.awaiting")[0].raw_reason == "function_call"
    assert_matches_snapshot(expected_of(FIXTURES / "function-call-legacy.sse"), events)


def test_two_calls_in_one_input_are_two_provider_calls():
    events = normalize(frames_of("two-calls-without-done.jsonl"))
    assert [e.kind for e in events if e.kind.startswith("run.")] == [
        "run.started", "run.awaiting", "run.started", "run.finished"]
    assert [p.provider_object_id for p in of_kind(events, "run.started")] == [
        "chatcmpl-first", "chatcmpl-second"]
    assert_matches_snapshot(expected_of(FIXTURES / "two-calls-without-done.jsonl"), events)


def test_next_call_after_done_starts_again():
    adapter = OpenAIChatAdapter(RUN)
    first = [e for f in frames_of("tool-call-no-ids.sse", stream_id="a") for e in adapter.feed(f)]
    second = normalize(frames_of("refusal.sse", stream_id="b"), adapter)
    assert first[-1].kind == "run.awaiting"
    assert second[0].kind == "run.started" and second[-1].kind == "run.finished"


# --- hostile input built in the test ---------------------------------------------------------


def test_duplicated_frames_produce_nothing_twice():
    frames = stream(chunk({"role": "assistant", "content": "a"}), chunk({"content": "b"}),
                    chunk({}, "stop"), b"[DONE]")
    adapter = OpenAIChatAdapter(RUN)
    events = []
    for f in frames[:2] + frames[:2] + frames[1:] + frames:
        events += adapter.feed(f)
    events += adapter.close()
    assert text_of(events) == "ab"
    assert kinds(events).count("run.finished") == 1
    assert len({e.event_id for e in events}) == len(events)


def test_empty_deltas_emit_nothing_and_a_huge_delta_passes_whole_its_done_refers_to_it():
    huge = "x" * 2_000_000
    events = normalize(stream(chunk({"role": "assistant", "content": ""}), chunk({"content": ""}),
                              chunk({}), chunk({"content": huge}), chunk({"content": ""}, "stop"),
                              b"[DONE]"))
    assert max(weight(e) for e in events) <= PIECE_BYTES + 3  # cut to fit Kafka records
    events = assemble(events)
    assert [p.text for p in of_kind(events, "text.delta")] == [huge]
    # Too large for the run's state to hold: the done event names the deltas that rebuild it.
    done = [e for e in events if e.kind == "text.done"][0]
    assert done.payload.text == "" and done.elided == Elided("text", "text.delta", 2_000_000)


def test_non_utf8_frame_is_repaired_and_reported_not_a_crash():
    bad = chunk({"content": "ok"}).replace(b"ok", b"o\xff\xfek")
    events = normalize(stream(chunk({"role": "assistant", "content": "a"}), bad,
                              chunk({}, "stop"), b"[DONE]"))
    assert [e.payload.error_type for e in events if e.kind == "error"] == ["invalid_utf8"]
    assert text_of(events) == "ao\ufffd\ufffdk" and events[-1].kind == "run.finished"


def test_non_object_json_is_unknown():
    events = normalize(stream(b"[1, 2]", b"42", chunk({"content": "a"}, "stop"), b"[DONE]"))
    assert [p.provider_type for p in of_kind(events, "unknown")] == ["(json list)", "(json int)"]


def test_done_alone_finishes_without_claiming_success():
    events = normalize(stream(b"[DONE]"))
    assert kinds(events) == ["run.finished"]
    assert (events[0].payload.status, events[0].payload.reason) == ("incomplete", "unknown")


def test_no_frames_at_all_is_truncated():
    assert kinds(OpenAIChatAdapter(RUN).close()) == ["error"]


def test_tool_call_index_starting_at_one_and_arguments_before_name():
    events = normalize(stream(
        chunk({"role": "assistant",
               "tool_calls": [{"index": 3, "function": {"arguments": "{\"a\""}}]}),
        chunk({"tool_calls": [{"index": 3, "id": "call_late", "function": {"name": "late"}}]}),
        chunk({"tool_calls": [{"index": 3, "function": {"arguments": ": 1}"}}]}),
        chunk({}, "tool_calls"), b"[DONE]"))
    [call] = of_kind(events, "tool.call")
    assert (call.tool_name, call.tool_call_id, call.arguments, call.arguments_valid) == (
        "late", "call_late", '{"a": 1}', True)
    assert "".join(p.arguments for p in of_kind(events, "tool.call.delta")) == '{"a": 1}'


def test_reasoning_tokens_outside_completion_are_added_to_output():
    # xAI: total = prompt + completion + reasoning (reference/openai.md §7).
    events = normalize(stream(chunk({"content": "a"}, "stop"), chunk(None, usage={
        "prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 17,
        "completion_tokens_details": {"reasoning_tokens": 5}}), b"[DONE]"))
    [usage] = of_kind(events, "usage")
    assert (usage.output_tokens, usage.reasoning_tokens, usage.total_tokens) == (7, 5, 17)
    assert usage.input_tokens + usage.output_tokens == usage.total_tokens


def test_model_follows_the_frames():
    events = normalize(stream(chunk({"content": "a"}, "stop"), b"[DONE]"))
    assert {e.model for e in events} == {"gpt-4o-mini"}


def test_adapter_state_pickles_mid_stream():
    adapter = OpenAIChatAdapter(RUN)
    frames = stream(chunk({"role": "assistant", "content": "a", "tool_calls": [
        {"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}, "tool_calls"),
        b"[DONE]")
    adapter.feed(frames[0])
    restored = pickle.loads(pickle.dumps(adapter))
    events = restored.feed(frames[1]) + restored.feed(frames[2]) + restored.close()
    assert of_kind(events, "tool.call")[0].arguments == "{}"
    assert events[-1].kind == "run.awaiting"


@pytest.mark.parametrize("doc, expected", [
    ({"object": "chat.completion.chunk", "choices": []}, True),
    ({"object": "chat.completion", "choices": []}, True),
    ({"choices": [], "id": "", "object": "", "prompt_filter_results": []}, True),
    ({"choices": [{"index": 0, "delta": {"content": "x"}}]}, True),
    ({"type": "response.created"}, False),
    ({"error": {"message": "x"}}, False),
    ([], False),
])
def test_recognizes(doc, expected):
    assert OpenAIChatAdapter.recognizes(doc) is expected


# --- issue #12 --------------------------------------------------------------------------------


def test_mistyped_fields_are_malformed_frames_and_the_rest_of_the_stream_is_kept():
    # A delta that is a string, null or a list, choices that are not a list, tool_calls that
    # are an object, a call that is a string, a token count that is a string: each is reported
    # precisely (malformed_frame) and everything else is used — never an exception.
    events = normalize(frames_of("mistyped-fields.sse"))
    errors = [e for e in events if e.kind == "error"]
    assert all(e.payload.error_type == "malformed_frame" for e in errors)
    assert [(e.source.frame_id, e.payload.message.split(": ", 1)[1]) for e in errors] == [
        ("s0:2", "choices[0].delta is a str, not an object"),
        ("s0:4", "choices[0].delta is a list, not an object"),
        ("s0:5", "choices is a str, not a list"),
        ("s0:6", "choices[0].delta.tool_calls is a dict, not a list"),
        ("s0:7", "choices[0].delta.tool_calls[1] is a str, not an object"),
        ("s0:8", "choices[0].delta is a str, not an object"),
        ("s0:9", "usage.prompt_tokens is a str, not an integer"),
        ("s0:9", "usage.prompt_tokens_details is a list, not an object")]
    assert text_of(events) == "Checking the weather."
    # The finish_reason beside a mistyped delta still ends the choice; a call streamed with no
    # arguments at all means the empty object.
    (call,) = of_kind(events, "tool.call")
    assert (call.tool_name, call.tool_call_id, call.arguments, call.arguments_valid) == (
        "get_weather", "call_w", "{}", True)
    (usage,) = of_kind(events, "usage")
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (None, 9, 21)
    assert (events[-1].kind, events[-1].payload.reason) == ("run.awaiting", "tool_results")


# --- issue #29: compatible servers (docs/compatible-servers.md) -------------------------------


def test_finish_repeated_under_a_new_id_stays_one_call_with_its_usage():
    # OpenRouter: the id changes mid-stream, the finish comes alone and again with usage.
    events = normalize(frames_of("finish-repeated-new-id.sse"))
    assert kinds(events).count("run.started") == 1
    assert [e.kind for e in events if e.kind.startswith("run.")] == ["run.started",
                                                                     "run.finished"]
    assert text_of(events) == "The capital of France is Paris."
    [usage] = of_kind(events, "usage")
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (14, 8, 22)
    assert kinds(events)[-2:] == ["usage", "run.finished"]  # usage inside the call it counts
    finished = events[-1].payload
    assert (finished.status, finished.reason, finished.raw_reason) == (
        "completed", "end_turn", "stop")
    assert_matches_snapshot(expected_of(FIXTURES / "finish-repeated-new-id.sse"), events)


def test_a_new_id_with_new_output_after_the_finish_is_still_the_next_call():
    # What keeps a repeated finish in its call must not merge a second call into the first.
    events = normalize(stream(
        chunk({"role": "assistant", "content": "a"}, "stop"),
        chunk({"role": "assistant", "content": "b"}, "stop").replace(b"chatcmpl-t", b"chatcmpl-u"),
        b"[DONE]"))
    assert [e.kind for e in events if e.kind.startswith("run.")] == [
        "run.started", "run.finished", "run.started", "run.finished"]


def test_usage_then_done_without_finish_reason_ends_the_call_normally():
    events = normalize(frames_of("no-finish-reason-usage-then-done.sse"))
    [call] = of_kind(events, "tool.call")
    assert (call.tool_name, call.tool_call_id, call.arguments, call.arguments_valid) == (
        "read_file", "call_k2m9", '{"path": "README.md"}', True)
    assert "error" not in kinds(events)
    awaiting = events[-1]
    assert awaiting.kind == "run.awaiting"
    assert (awaiting.payload.reason, awaiting.payload.raw_reason) == ("tool_results", None)
    assert_matches_snapshot(expected_of(FIXTURES / "no-finish-reason-usage-then-done.sse"), events)


def test_text_without_finish_reason_completes_after_usage_and_done_only():
    body = [chunk({"role": "assistant", "content": "Hi"}),
            chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4})]
    ended = normalize(stream(*body, b"[DONE]"))[-1]
    assert (ended.kind, ended.payload.status, ended.payload.reason, ended.payload.raw_reason) == (
        "run.finished", "completed", "end_turn", None)
    # [DONE] with no usage before it says nothing of how the output ended.
    bare = normalize(stream(body[0], b"[DONE]"))[-1]
    assert (bare.payload.status, bare.payload.reason) == ("incomplete", "unknown")
    # Usage but no [DONE]: the stream was cut.
    cut = normalize(stream(*body))
    assert cut[-1].kind == "error" and cut[-1].payload.error_type == "stream_truncated"


def test_openrouter_reasoning_text_keeps_its_signature():
    events = normalize(frames_of("openrouter-reasoning-text-signature.sse"))
    assert "unknown" not in kinds(events)
    [done] = of_kind(events, "reasoning.done")
    assert (done.form, done.text) == ("raw", "The user asks for 17*23. 17*20=340, 17*3=51, so 391.")
    assert done.signature.startswith("EqQBCkgIBxAB") and done.encrypted_content is None
    assert done.valid_for == "openai/anthropic/claude-sonnet-4"  # the provider named the stream
    # The `reasoning` string beside reasoning_details is the same text: counted once.
    assert "".join(p.text for p in of_kind(events, "reasoning.delta")) == done.text
    assert text_of(events) == "17 × 23 = 391."
    assert events[-1].payload.status == "completed"
    assert_matches_snapshot(expected_of(FIXTURES / "openrouter-reasoning-text-signature.sse"),
                            events)


def test_openrouter_reasoning_summary_and_encrypted_item():
    events = normalize(frames_of("openrouter-reasoning-summary-encrypted.sse"))
    assert "unknown" not in kinds(events)
    summary, encrypted = of_kind(events, "reasoning.done")
    assert (summary.form, summary.part_index) == ("summary", 0)
    assert summary.text == "**Checking the weather**\n\nThe user wants Paris; I should call get_weather."
    assert (encrypted.form, encrypted.part_index, encrypted.text) == ("redacted", 1, "")
    assert encrypted.item_id == "rs_0a1b2c3d4e5f60718293a4b5c6d7e8f9"
    assert encrypted.encrypted_content.startswith("gAAAAAB") and encrypted.valid_for
    [call] = of_kind(events, "tool.call")
    assert (call.tool_name, call.arguments) == ("get_weather", '{"city":"Paris"}')
    assert events[-1].kind == "run.awaiting"
    assert_matches_snapshot(expected_of(FIXTURES / "openrouter-reasoning-summary-encrypted.sse"),
                            events)


def test_reasoning_details_of_another_index_are_another_part_and_bad_items_are_reported():
    detail = lambda **item: {"reasoning_details": [item]}  # noqa: E731
    events = normalize(stream(
        chunk({"role": "assistant", **detail(type="reasoning.text", text="one", index=0)}),
        chunk(detail(type="reasoning.text", text="two", index=1, id="r2")),
        chunk(detail(type="reasoning.text", text="", signature="sig-2", index=1)),
        chunk(detail(type="reasoning.future", text="?")),
        chunk({"reasoning_details": ["not an object"]}),
        chunk({"reasoning_details": {"type": "reasoning.text"}}),
        chunk(detail(type="reasoning.encrypted", data=7)),
        chunk({"content": "done"}, "stop"), b"[DONE]"))
    done = of_kind(events, "reasoning.done")
    assert [(d.part_index, d.text, d.item_id, d.signature) for d in done] == [
        (0, "one", None, None), (1, "two", "r2", "sig-2")]
    assert [p.provider_type for p in of_kind(events, "unknown")] == [
        "reasoning_details:reasoning.future"]
    assert [e.payload.message.split(": ", 1)[1] for e in events if e.kind == "error"] == [
        "choices[0].delta.reasoning_details[0] is a str, not an object",
        "choices[0].delta.reasoning_details is a dict, not a list",
        "choices[0].delta.reasoning_details[0].data is a int, not a string"]
    assert text_of(events) == "done" and events[-1].payload.status == "completed"


def test_tool_call_header_resent_on_every_delta_is_one_call():
    # Fireworks and LiteLLM's proxy resend id, type and name on every delta; LocalAI moves the
    # same call to another index.
    events = normalize(frames_of("tool-call-header-repeated.sse"))
    [call] = of_kind(events, "tool.call")
    assert (call.tool_name, call.tool_call_id, call.arguments, call.arguments_valid) == (
        "get_weather", "chatcmpl-tool-aa62", '{"city": "Paris", "unit": "c"}', True)
    assert len(of_kind(events, "tool.call.started")) == 1
    assert "".join(p.arguments for p in of_kind(events, "tool.call.delta")) == call.arguments
    assert events[-1].kind == "run.awaiting"
    assert_matches_snapshot(expected_of(FIXTURES / "tool-call-header-repeated.sse"), events)


def test_same_index_with_a_new_id_or_a_known_id_with_another_name_is_another_call():
    header = lambda index, call_id, name, args: {"tool_calls": [  # noqa: E731
        {"index": index, "id": call_id, "type": "function",
         "function": {"name": name, "arguments": args}}]}
    events = normalize(stream(
        chunk({"role": "assistant", **header(0, "a", "f", "{}")}),
        chunk(header(0, "b", "f", "{}")),  # Ollama numbers every call 0
        chunk(header(1, "a", "g", "{}")),  # a server reusing one id for two tools
        chunk({}, "tool_calls"), b"[DONE]"))
    assert [(c.tool_call_id, c.tool_name, c.arguments) for c in of_kind(events, "tool.call")] == [
        ("a", "f", "{}"), ("b", "f", "{}"), ("a", "g", "{}")]


def test_complete_object_calls_sharing_an_id_stay_apart():
    # Xinference gives every call of a message one id; whole calls are never fragments.
    calls = [{"id": "call_same", "type": "function", "function": {"name": "f", "arguments": a}}
             for a in ('{"x": 1}', '{"x": 2}')]
    body = orjson.dumps({"id": "chatcmpl-x", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": calls},
         "finish_reason": "tool_calls"}]})
    events = normalize(stream(body))
    assert [c.arguments for c in of_kind(events, "tool.call")] == ['{"x": 1}', '{"x": 2}']
