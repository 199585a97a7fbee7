"""adapters/gemini_interactions.py on hand-written streams and hostile input.

Each fixture in tests/fixtures/gemini-interactions/ shows one behaviour the recorded corpus lacks
(named for it); its full event sequence is a reviewed snapshot, and the facts a user relies on
(text, tool calls, hosted tools, terminal state) are asserted beside the snapshot.
"""

from __future__ import annotations

import pickle

import orjson
import pytest

from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.gemini_interactions import GeminiInteractionsAdapter
from modelevents.schemas.events import Elided, ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import PIECE_BYTES
from modelevents.schemas.pieces import assemble, weight
from tests import paths
from tests.helpers import feed_all, kinds, of_kind
from tests.snapshots import assert_matches_snapshot, expected_of

FIXTURES = paths.FIXTURES / "gemini-interactions"
RUN = "run-test"


# --- helpers -----------------------------------------------------------------------------------


def frames_of(name: str, stream_id: str = "s0", **kwargs) -> list[ProviderFrame]:
    return frames_from_bytes((FIXTURES / name).read_bytes(), run_key=RUN, provider="google",
                             api="gemini-interactions", stream_id=stream_id, **kwargs)


def run(frames: list[ProviderFrame], adapter: GeminiInteractionsAdapter | None = None
        ) -> list[ModelEvent]:
    return feed_all(adapter or GeminiInteractionsAdapter(RUN), frames)


def frame(body: bytes | str | dict, index: int, stream_id: str = "s0", **kwargs) -> ProviderFrame:
    if isinstance(body, dict):
        body = orjson.dumps(body)
    elif isinstance(body, str):
        body = body.encode()
    return ProviderFrame(frame_id=f"{stream_id}:{index}", run_key=RUN, provider="google",
                         api="gemini-interactions", transport=kwargs.pop("transport", "sse"),
                         received_at=0, content_type="text/event-stream", body=body, index=index,
                         **kwargs)


def stream(*docs: dict | bytes, stream_id: str = "s0") -> list[ProviderFrame]:
    return [frame(d, i, stream_id) for i, d in enumerate(docs)]


def created(iid: str = "v1_t", model: str = "gemini-2.5-flash") -> dict:
    return {"interaction": {"id": iid, "status": "in_progress", "model": model},
            "event_type": "interaction.created"}


def completed(iid: str = "v1_t", status: str = "completed", **extra) -> dict:
    return {"interaction": {"id": iid, "status": status, **extra},
            "event_type": "interaction.completed"}


def step_start(index: int, step: dict) -> dict:
    return {"index": index, "step": step, "event_type": "step.start"}


def step_delta(index: int, delta: dict) -> dict:
    return {"index": index, "delta": delta, "event_type": "step.delta"}


def step_stop(index: int) -> dict:
    return {"index": index, "event_type": "step.stop"}


def text_stream(*texts: str) -> list[dict]:
    return [created(), step_start(0, {"type": "model_output"}),
            *(step_delta(0, {"type": "text", "text": t}) for t in texts), step_stop(0),
            completed()]


# --- hand-written fixtures ---------------------------------------------------------------------


def test_store_false_calls_get_stable_synthesized_ids_and_await_results():
    events = run(frames_of("store-false-parallel-calls.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "store-false-parallel-calls.sse"), events)
    calls = of_kind(events, "tool.call")
    assert [(c.tool_name, orjson.loads(c.arguments)) for c in calls] == [
        ("getWeather", {"location": "Zürich", "unit": "C"}), ("getTime", {})]
    assert all(c.tool_call_id.startswith("mev_") and c.arguments_valid for c in calls)
    assert len({c.tool_call_id for c in calls}) == 2
    # Same frames → same ids; another run → other ids.
    again = of_kind(run(frames_of("store-false-parallel-calls.sse")), "tool.call")
    assert [c.tool_call_id for c in again] == [c.tool_call_id for c in calls]
    adapter = GeminiInteractionsAdapter("another-run")
    other = of_kind(run(frames_of("store-false-parallel-calls.sse"), adapter), "tool.call")
    assert {c.tool_call_id for c in other}.isdisjoint(c.tool_call_id for c in calls)
    # Nothing carries the empty provider id.
    assert of_kind(events, "run.started")[0].provider_object_id is None
    assert all(e.payload.item_id is None for e in events if e.kind.startswith("tool.call"))
    # The call step's signature is kept, tagged for the model, tied to the call.
    (signed,) = of_kind(events, "reasoning.done")
    assert (signed.signature, signed.item_id, signed.valid_for) == (
        "c2lnLWNhbGwtMQ==", calls[0].tool_call_id, "google/gemini-3-flash-preview")
    assert kinds(events)[-2:] == ["usage", "run.awaiting"]
    assert of_kind(events, "run.awaiting")[0].reason == "tool_results"


def test_google_search_citations_use_char_offsets_and_hosted_evidence():
    events = run(frames_of("google-search-cited-event-ids.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "google-search-cited-event-ids.sse"), events)
    (done,) = of_kind(events, "text.done")
    assert done.text == "Zürich hat heute 21 °C und Sonne."  # e10 came twice, counted once
    first, second = of_kind(events, "citation")
    # start/end_index are UTF-8 byte offsets on the wire; events count characters.
    assert (first.start, first.end, first.cited_text) == (0, 22, "Zürich hat heute 21 °C")
    assert second.cited_text == done.text
    assert first.url.startswith("https://vertexaisearch.cloud.google.com/")
    (call,) = of_kind(events, "hosted.call")
    assert (call.tool_type, call.call_id, call.executor, call.authority) == (
        "web_search", "gs1", "provider", "provider")
    assert (call.billable_unit, call.quantity) == ("search_query", 2)
    assert orjson.loads(call.arguments) == {"queries": ["Zürich Wetter heute",
                                                        "Zurich weather today"]}
    (result,) = of_kind(events, "hosted.result")
    assert result.call_id == "gs1" and "search_suggestions" in result.evidence
    assert not of_kind(events, "tool.call")
    (reasoning,) = of_kind(events, "reasoning.done")
    assert (reasoning.form, reasoning.signature) == ("summary", "dGhvdWdodC1zaWc=")
    assert reasoning.text == "**Checking the weather**\nI will search for it."
    (usage,) = of_kind(events, "usage")
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens,
            usage.total_tokens) == (112, 110, 80, 222)
    assert usage.server_tool_units == {"google_search": 2}
    # The provider's event id is the cursor of every event of its frame.
    assert {e.source.cursor for e in events if e.kind == "text.delta"} == {"e9", "e10"}


def test_hosted_tools_are_hosted_never_tool_calls():
    events = run(frames_of("hosted-tools-mixed.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "hosted-tools-mixed.sse"), events)
    assert not of_kind(events, "tool.call")
    calls = {c.call_id: c for c in of_kind(events, "hosted.call")}
    results = {r.call_id: r for r in of_kind(events, "hosted.result")}
    assert set(calls) == set(results) == {"ce1", "uc1", "mcp1"}
    assert [calls[i].tool_type for i in ("ce1", "uc1", "mcp1")] == [
        "code_execution", "web_fetch", "mcp"]
    assert orjson.loads(results["ce1"].evidence) == {"result": "1024\n"}
    assert results["uc1"].is_error and results["uc1"].status == "failed"
    assert calls["mcp1"].authority == results["mcp1"].authority == "mcp:github"
    assert calls["mcp1"].name == "list_issues"
    # Gemini 3 signs hosted steps: the signature is kept beside the call it belongs to.
    (signed,) = of_kind(events, "reasoning.done")
    assert (signed.item_id, signed.signature, signed.form) == ("ce1", "Y29kZS1zaWc=", "redacted")
    assert of_kind(events, "run.finished")[0].status == "completed"


def test_error_event_midstream_fails_the_run_retryably():
    events = run(frames_of("error-event-midstream.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "error-event-midstream.sse"), events)
    assert kinds(events)[-2:] == ["error", "run.finished"]
    error = of_kind(events, "error")[0]
    assert (error.error_type, error.code, error.retryable) == ("overloaded", "UNAVAILABLE", True)
    assert of_kind(events, "run.finished")[0].status == "failed"
    assert "text.done" not in kinds(events)


def test_error_event_followed_by_completed_lets_the_interaction_decide():
    events = run(stream(created(), {"error": {"code": "INTERNAL", "message": "x"},
                                    "event_type": "error"},
                        completed(status="failed")))
    assert kinds(events) == ["run.started", "error", "run.finished"]
    assert of_kind(events, "run.finished")[0].raw_reason == "failed"


def test_image_between_text_parts():
    events = run(frames_of("image-between-text.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "image-between-text.sse"), events)
    assert [(t.part_index, t.text) for t in of_kind(events, "text.done")] == [
        (0, "Here is a red dot:"), (2, "Anything else?")]
    (image,) = of_kind(events, "media.done")
    assert image.mime_type == "image/png" and image.data.startswith(b"\x89PNG")


def test_legacy_function_call_ending_completed_awaits_results():
    events = run(frames_of("legacy-function-call-completed.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "legacy-function-call-completed.sse"), events)
    (call,) = of_kind(events, "tool.call")
    assert (call.tool_name, call.tool_call_id, call.arguments) == (
        "lookup", "abc12345", '{"q":"modelevents"}')
    assert of_kind(events, "run.awaiting")[0].raw_reason == "completed"
    assert "run.finished" not in kinds(events)


def test_unknown_event_step_and_delta_types_become_unknown_and_the_stream_goes_on():
    events = run(frames_of("unknown-and-malformed.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "unknown-and-malformed.sse"), events)
    assert [u.provider_type for u in of_kind(events, "unknown")] == [
        "interaction.heartbeat", "step:hologram_call", "step.delta:sparkle"]
    unknown = next(e for e in events if e.kind == "unknown")
    assert b"interaction.heartbeat" in unknown.envelope.body  # the provider frame is kept
    assert of_kind(events, "error")[0].error_type == "malformed_frame"
    assert [t.text for t in of_kind(events, "text.done")] == ["Still here."]
    assert kinds(events)[-1] == "run.finished"


@pytest.mark.parametrize("event_type", [["step.delta"], {"a": 1}, 7, True])
def test_an_event_type_that_is_no_string_is_unknown_and_the_stream_goes_on(event_type):
    # The dispatch is a subscript: a name that is not hashable or not a key falls through alike.
    docs = text_stream("Hi", "!")
    events = run(stream(*docs[:2], {"index": 0, "event_type": event_type}, *docs[2:]))
    assert [u.provider_type for u in of_kind(events, "unknown")] == [str(event_type)]
    assert "error" not in kinds(events)
    assert [t.text for t in of_kind(events, "text.done")] == ["Hi!"]
    assert kinds(events)[-1] == "run.finished"


def test_a_call_step_without_argument_deltas_calls_with_the_empty_object():
    # A step's argument Parts is made only when arguments arrive: none is still "{}", valid.
    events = run(stream(created(), step_start(0, {"type": "function_call", "id": "c1",
                                                  "name": "now"}),
                        step_stop(0), completed()))
    (call,) = of_kind(events, "tool.call")
    assert (call.tool_call_id, call.arguments, call.arguments_valid) == ("c1", "{}", True)


def test_truncated_stream_ends_with_stream_truncated_never_a_tool_call():
    events = run(frames_of("truncated-mid-arguments.sse"))
    assert_matches_snapshot(expected_of(FIXTURES / "truncated-mid-arguments.sse"), events)
    assert kinds(events)[-1] == "error"
    assert of_kind(events, "error")[0].error_type == "stream_truncated"
    assert "tool.call" not in kinds(events) and "run.finished" not in kinds(events)


def test_failed_interaction_object_reports_its_errors_and_fails():
    events = run(frames_of("failed-interaction.json"))
    assert_matches_snapshot(expected_of(FIXTURES / "failed-interaction.json"), events)
    assert events[0].source.transport == "poll"
    error = of_kind(events, "error")[0]
    assert (error.error_type, error.code, error.message, error.retryable) == (
        "server_error", "INTERNAL", "An internal error has occurred.", True)
    finished = of_kind(events, "run.finished")[0]
    assert (finished.status, finished.reason, finished.raw_reason) == ("failed", "error", "failed")


def test_http_error_body_fails_retryably_with_its_status():
    events = run(frames_of("http-error-429.json"))
    assert_matches_snapshot(expected_of(FIXTURES / "http-error-429.json"), events)
    assert kinds(events) == ["error", "run.finished"]
    error = of_kind(events, "error")[0]
    assert (error.error_type, error.http_status, error.code, error.retryable) == (
        "rate_limited", 429, "RESOURCE_EXHAUSTED", True)
    assert error.message.endswith("(retry after 13s)")


def test_repeated_polls_translate_each_step_once():
    adapter = GeminiInteractionsAdapter(RUN)
    frames = frames_of("poll-running.json", "p1") + frames_of("poll-completed.json", "p2")
    events = run(frames, adapter)
    snapshot = paths.ADAPTER_SNAPSHOTS / "gemini-interactions" / "poll-running-then-completed.jsonl"
    assert_matches_snapshot(snapshot, events)
    assert kinds(events).count("run.started") == 1
    assert kinds(events).count("reasoning.done") == 1
    (citation,) = of_kind(events, "citation")
    assert (citation.source_type, citation.file_id, citation.cited_text) == (
        "file", "fileSearchStores/s1/documents/d1", "all good.")
    assert kinds(events)[-1] == "run.finished"
    # A third read (a webhook, another poll) of the ended interaction adds nothing.
    assert run(frames_of("poll-completed.json", "p3"), adapter) == []


# --- lifecycle ---------------------------------------------------------------------------------


def test_tool_loop_across_two_interactions_in_one_adapter():
    docs = [created("v1_a"), step_start(0, {"type": "function_call", "id": "c1", "name": "f",
                                            "arguments": {}}),
            step_delta(0, {"type": "arguments_delta", "arguments": "{}"}), step_stop(0),
            completed("v1_a", "requires_action"),
            *text_stream("done")[:-1], completed("v1_t")]
    events = run(stream(*docs))
    assert [s.provider_object_id for s in of_kind(events, "run.started")] == ["v1_a", "v1_t"]
    assert kinds(events).index("run.awaiting") < kinds(events).index("run.finished")
    assert kinds(events)[-1] == "run.finished"


def test_stream_then_poll_of_the_same_interaction_adds_nothing():
    poll = {"id": "v1_t", "status": "completed", "object": "interaction",
            "steps": [{"type": "model_output", "content": [{"type": "text", "text": "hi"}]}]}
    events = run(stream(*text_stream("hi")) + [frame(poll, 0, "poll", transport="poll")])
    assert kinds(events).count("text.done") == 1
    assert kinds(events)[-1] == "run.finished"


@pytest.mark.parametrize("status,expected", [
    ("completed", ("run.finished", "completed", "end_turn")),
    ("requires_action", ("run.awaiting", "tool_results", None)),
    ("failed", ("run.finished", "failed", "error")),
    ("cancelled", ("run.finished", "cancelled", "cancelled")),
    ("incomplete", ("run.finished", "incomplete", "max_tokens")),
    ("budget_exceeded", ("run.finished", "incomplete", "budget_exceeded")),
])
def test_final_status_maps_to_the_run_outcome(status, expected):
    events = run(stream(created(), completed(status=status)))
    last = events[-1]
    kind, first, reason = expected
    assert last.kind == kind
    if kind == "run.awaiting":
        assert (last.payload.reason, last.payload.raw_reason) == (first, status)
    else:
        assert (last.payload.status, last.payload.reason, last.payload.raw_reason) == (
            first, reason, status)


def test_unknown_final_status_fails_safe():
    events = run(stream(created(), completed(status="vanished")))
    assert kinds(events)[-2:] == ["unknown", "run.finished"]
    assert of_kind(events, "run.finished")[0].status == "incomplete"


def test_status_updates_report_changes_only():
    events = run(stream(created(), {"interaction_id": "v1_t", "status": "in_progress",
                                    "event_type": "interaction.status_update"},
                        {"interaction_id": "v1_t", "status": "requires_action",
                         "event_type": "interaction.status_update"},
                        completed(status="requires_action")))
    assert kinds(events) == ["run.started", "run.status", "run.awaiting"]
    assert of_kind(events, "run.status")[0].status == "requires_action"


def test_queued_background_interaction_starts_queued():
    events = run(stream({"interaction": {"id": "v1_q", "status": "queued"},
                         "event_type": "interaction.created"},
                        {"interaction_id": "v1_q", "status": "in_progress",
                         "event_type": "interaction.status_update"}))
    assert of_kind(events, "run.started")[0].status == "queued"
    assert of_kind(events, "run.status")[0].status == "in_progress"


def test_step_delta_without_its_start_opens_the_step():
    # A stream resumed with last_event_id mid-step: the deltas still count.
    events = run(stream(step_delta(1, {"type": "text", "text": "resumed"}), step_stop(1),
                        completed()))
    assert [t.text for t in of_kind(events, "text.done")] == ["resumed"]
    assert kinds(events)[-1] == "run.finished"


def test_poll_object_with_string_arguments_and_open_steps_closed_at_the_end():
    poll = {"id": "v1_p", "status": "requires_action", "object": "interaction",
            "steps": [{"type": "function_call", "id": "c9", "name": "g",
                       "arguments": "{\"a\": [1, 2]}"}]}
    events = run([frame(poll, 0, transport="poll")])
    (call,) = of_kind(events, "tool.call")
    assert (call.arguments, call.arguments_valid) == ('{"a": [1, 2]}', True)
    assert kinds(events)[-1] == "run.awaiting"


def test_webhook_delivery_with_an_interaction_translates():
    # Webhook payload shape is not verified (reference A7); the interaction inside is read.
    body = {"type": "interaction.completed",
            "data": {"id": "v1_w", "status": "completed", "usage": {"total_tokens": 3}}}
    events = run([frame(body, 0, "wh", transport="webhook")])
    assert kinds(events) == ["run.started", "usage", "run.finished"]


# --- hostile input -----------------------------------------------------------------------------


def test_duplicated_frames_emit_nothing_the_second_time():
    adapter = GeminiInteractionsAdapter(RUN)
    frames = stream(*text_stream("a", "b"))
    first = [e for f in frames for e in adapter.feed(f)]
    assert [e for f in frames for e in adapter.feed(f)] == []
    assert [t.text for t in of_kind(first, "text.delta")] == ["a", "b"]


def test_duplicate_event_id_from_a_resumed_stream_is_dropped():
    docs = [dict(d, event_id=f"ev{i}") for i, d in enumerate(text_stream("a", "b"))]
    resumed = stream(*docs[:3]) + stream(*docs[2:], stream_id="s1")  # overlap: ev2 twice
    events = run(resumed)
    assert [t.text for t in of_kind(events, "text.delta")] == ["a", "b"]
    assert of_kind(events, "text.done")[0].text == "ab"


def test_repeated_step_start_without_event_id_is_ignored():
    docs = text_stream("a")
    events = run(stream(*docs[:3], docs[1], *docs[3:]))
    assert kinds(events).count("message.started") == 1


def test_non_utf8_frame_body_is_repaired_reported_and_the_stream_goes_on():
    frames = stream(*text_stream("ok"))
    bad = frame(b'{"index":0,"delta":{"type":"text","text":"\xff\xfe"},"event_type":"step.delta"}',
                99)
    events = run(frames[:3] + [bad] + frames[3:])
    assert [e.error_type for e in of_kind(events, "error")] == ["invalid_utf8"]
    assert of_kind(events, "text.done")[0].text == "ok\ufffd\ufffd"  # the delta is not lost
    assert kinds(events)[-1] == "run.finished"


def test_json_that_is_not_an_object_is_malformed():
    events = run(stream(b"[1, 2]", *text_stream("x")))
    assert events[0].kind == "error" and events[0].payload.error_type == "malformed_frame"


def test_known_event_missing_required_fields_is_unexpected_shape_not_a_crash():
    events = run(stream(created(), {"index": 0, "event_type": "step.delta"},
                        {"event_type": "interaction.completed"}, completed()))
    assert [e.payload.error_type for e in events if e.kind == "error"] == [
        "unexpected_shape", "unexpected_shape"]
    assert kinds(events)[-1] == "run.finished"


def test_delta_of_the_wrong_type_for_its_step_is_a_protocol_violation():
    events = run(stream(created(), step_start(0, {"type": "thought"}),
                        step_delta(0, {"type": "text", "text": "x"}), step_stop(0), completed()))
    assert of_kind(events, "error")[0].error_type == "protocol_violation"
    assert "text.delta" not in kinds(events)


def test_empty_deltas_emit_nothing():
    events = run(stream(created(), step_start(0, {"type": "model_output"}),
                        step_delta(0, {"type": "text", "text": ""}),
                        step_start(1, {"type": "function_call", "id": "c", "name": "f",
                                       "arguments": {}}),
                        step_delta(1, {"type": "arguments_delta", "arguments": ""}),
                        step_stop(0), step_stop(1), completed(status="requires_action")))
    assert "text.delta" not in kinds(events) and "tool.call.delta" not in kinds(events)
    assert of_kind(events, "tool.call")[0].arguments == "{}"


def test_huge_delta_passes_through_whole_and_its_done_event_refers_to_the_deltas():
    huge = "é" * 1_000_000
    events = run(stream(*text_stream(huge)))
    assert max(weight(e) for e in events) <= PIECE_BYTES + 3  # cut to fit Kafka records
    events = assemble(events)
    assert of_kind(events, "text.delta")[0].text == huge
    done = next(e for e in events if e.kind == "text.done")
    assert done.payload.text == "" and done.elided == Elided("text", "text.delta", 2_000_000)


def test_invalid_tool_arguments_are_kept_and_flagged():
    events = run(stream(created(), step_start(0, {"type": "function_call", "id": "c",
                                                  "name": "f", "arguments": {}}),
                        step_delta(0, {"type": "arguments_delta", "arguments": "{\"a\": tru"}),
                        step_stop(0), completed(status="requires_action")))
    (call,) = of_kind(events, "tool.call")
    assert (call.arguments, call.arguments_valid) == ('{"a": tru', False)


def test_done_sentinel_is_ignored():
    events = run(stream(*text_stream("x"), b"[DONE]"))
    assert kinds(events)[-1] == "run.finished"
    assert "error" not in kinds(events)


def test_event_ids_are_deterministic_and_unique():
    first = run(frames_of("hosted-tools-mixed.sse"))
    second = run(frames_of("hosted-tools-mixed.sse"))
    assert [e.event_id for e in first] == [e.event_id for e in second]
    assert len({e.event_id for e in first}) == len(first)


def test_adapter_state_survives_pickling_mid_stream():
    frames = frames_of("store-false-parallel-calls.sse")
    whole = run(frames)
    adapter = GeminiInteractionsAdapter(RUN)
    head = [e for f in frames[:4] for e in adapter.feed(f)]
    resumed = pickle.loads(pickle.dumps(adapter))
    tail = run(frames[4:], resumed)
    assert [(e.event_id, e.kind, e.payload) for e in head + tail] == [
        (e.event_id, e.kind, e.payload) for e in whole]


def test_recognizes_its_own_shapes_only():
    recognizes = GeminiInteractionsAdapter.recognizes
    assert recognizes(created())
    assert recognizes({"index": 0, "content": {"type": "text"}, "event_type": "content.start"})
    assert recognizes({"id": "v1_x", "status": "completed", "object": "interaction"})
    assert recognizes({"status": "completed", "outputs": []})
    assert not recognizes({"type": "message_start", "message": {}})
    assert not recognizes({"object": "chat.completion.chunk", "choices": []})
    assert not recognizes({"candidates": [], "usageMetadata": {}})
    assert not recognizes({"event_type": ["odd"]})
    assert not recognizes([1, 2])


def test_replayed_stream_of_an_ended_interaction_adds_nothing():
    # GET ?stream=true without last_event_id replays from the start, without event ids.
    adapter = GeminiInteractionsAdapter(RUN)
    first = [e for f in stream(*text_stream("a")) for e in adapter.feed(f)]
    again = [e for f in stream(*text_stream("a"), stream_id="s1") for e in adapter.feed(f)]
    assert kinds(first)[-1] == "run.finished" and again == []
    assert adapter.close() == []


def test_resumed_stream_of_the_open_interaction_does_not_restart_the_run():
    docs = text_stream("a", "b")
    events = run(stream(*docs[:3]) + stream(docs[0], docs[3], *docs[4:], stream_id="s1"))
    assert kinds(events).count("run.started") == 1
    assert of_kind(events, "text.done")[0].text == "ab"


def test_model_output_error_status_is_reported_without_a_fake_http_status():
    poll = {"id": "v1_e", "status": "incomplete", "steps": [
        {"type": "model_output", "content": [{"type": "text", "text": "Par"}],
         "error": {"code": 8, "message": "Output was cut."}}]}
    events = run([frame(poll, 0, transport="poll")])
    error = of_kind(events, "error")[0]
    assert (error.code, error.http_status, error.message) == ("8", None, "Output was cut.")
    assert of_kind(events, "text.done")[0].text == "Par"
    assert of_kind(events, "run.finished")[0].status == "incomplete"


def test_google_maps_is_maps_search_and_a_place_citation_a_place():
    # The same names as the generateContent adapter (schemas/vocabulary.py; issue #12 drift).
    events = run(frames_of("maps-grounding.sse"))
    assert {h.tool_type for h in of_kind(events, "hosted.call") + of_kind(events, "hosted.result")
            } == {"maps_search"}
    (citation,) = of_kind(events, "citation")
    assert (citation.source_type, citation.url, citation.title) == (
        "place", "https://maps.google.com/?cid=1", "Kranzler Eck")
    assert (citation.start, citation.end) == (0, len("Kranzler Eck is on Kurfürstendamm."))
    assert of_kind(events, "run.finished")[0].status == "completed"


def test_unknown_final_status_is_other_with_the_raw_status_never_completed():
    events = run(stream(created(), completed(status="evaporated")))
    finished = of_kind(events, "run.finished")[0]
    assert (finished.status, finished.reason, finished.raw_reason) == (
        "incomplete", "other", "evaporated")


def test_idle_status_is_a_running_interaction():
    events = run(stream(created(), {"interaction_id": "v1_t", "status": "idle",
                                    "event_type": "interaction.status_update"}, completed()))
    (status,) = of_kind(events, "run.status")
    assert (status.status, status.raw_status) == ("in_progress", "idle")


def test_media_that_is_not_base64_is_reported_and_kept_in_the_envelope():
    events = run(stream(created(), step_start(0, {"type": "model_output"}),
                        step_delta(0, {"type": "image", "mime_type": "image/png",
                                       "data": "not base64 at all!"}),
                        step_stop(0), completed()))
    assert [e.error_type for e in of_kind(events, "error")] == ["malformed_media"]
    assert of_kind(events, "media.done")[0].data is None
