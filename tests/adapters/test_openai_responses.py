"""adapters/openai_responses.py against hand-written streams and objects
(tests/fixtures/openai-responses/) and hostile input. The recorded corpus is in
tests/conformance/test_openai_responses_corpus.py."""

from __future__ import annotations

import dataclasses
import pickle
import random

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.openai_responses import REORDER_WINDOW, OpenAIResponsesAdapter
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import PIECE_BYTES
from modelevents.schemas.pieces import assemble, weight
from tests import paths
from tests.helpers import feed_all, kinds, of_kind, text_of
from tests.snapshots import assert_matches_snapshot, event_projection, expected_of

FIXTURES = paths.FIXTURES / "openai-responses"
RUN = "run-responses"


def frames_of(name: str, *, stream_id: str = "s0", http_status: int | None = None
              ) -> list[ProviderFrame]:
    return frames_from_bytes((FIXTURES / name).read_bytes(), run_key=RUN, provider="openai",
                             api="openai-responses", stream_id=stream_id, http_status=http_status)


def normalize(frames: list[ProviderFrame], adapter: OpenAIResponsesAdapter | None = None
              ) -> list[ModelEvent]:
    return feed_all(adapter or OpenAIResponsesAdapter(RUN), frames)


def frame(doc: dict | bytes, n: int, transport: str = "sse") -> ProviderFrame:
    body = doc if isinstance(doc, bytes) else orjson.dumps(doc)
    return ProviderFrame(f"s0:{n}", RUN, "openai", "openai-responses", transport, 0,
                         "text/event-stream", body)


def stream(*docs: dict | bytes) -> list[ProviderFrame]:
    return [frame(doc, n) for n, doc in enumerate(docs)]


# A tiny stream to build hostile cases on.
CREATED = {"type": "response.created", "sequence_number": 0,
           "response": {"id": "resp_h", "status": "in_progress", "model": "gpt-5", "output": []}}
ADDED = {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
         "item": {"id": "msg_h", "type": "message", "status": "in_progress", "role": "assistant",
                  "content": []}}


def delta(text: str, seq: int) -> dict:
    return {"type": "response.output_text.delta", "sequence_number": seq, "item_id": "msg_h",
            "output_index": 0, "content_index": 0, "delta": text}


def completed(seq: int, text: str) -> dict:
    item = {"id": "msg_h", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {"type": "response.completed", "sequence_number": seq,
            "response": {"id": "resp_h", "status": "completed", "model": "gpt-5",
                         "output": [item], "usage": {"input_tokens": 3, "output_tokens": 2,
                                                     "total_tokens": 5}}}


# --- hand-written fixtures: the facts beside the reviewed snapshot -------------------------

FIXTURE_STREAMS = sorted(p.name for p in FIXTURES.glob("*.sse"))


@pytest.mark.parametrize("name", FIXTURE_STREAMS)
def test_fixture_stream_matches_snapshot(name):
    assert_matches_snapshot(expected_of(FIXTURES / name), normalize(frames_of(name)))


def test_text_deltas_reassemble_and_usage_is_absolute():
    events = normalize(frames_of("text-with-usage.sse"))
    assert text_of(events) == "Hello, wörld 👋"
    assert [p.text for p in of_kind(events, "text.done")] == ["Hello, wörld 👋"]
    assert "" not in [p.text for p in of_kind(events, "text.delta")]  # empty delta: no event
    (usage,) = of_kind(events, "usage")
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
            usage.reasoning_tokens, usage.total_tokens) == (40, 20, 32, 8, 60)
    assert kinds(events)[0] == "run.started" and kinds(events)[-1] == "run.finished"
    finished = events[-1].payload
    assert (finished.status, finished.reason, finished.raw_reason) == (
        "completed", "end_turn", "completed")
    assert all(e.model == "gpt-5-mini-2025-08-07" for e in events)


def test_refusal_is_emitted_whole_and_finishes_with_reason_refusal():
    events = normalize(frames_of("refusal.sse"))
    assert [p.text for p in of_kind(events, "refusal")] == ["I'm sorry, I can't help with that."]
    assert of_kind(events, "text.delta") == []
    assert (events[-1].kind, events[-1].payload.reason) == ("run.finished", "refusal")


def test_incomplete_maps_max_output_tokens():
    events = normalize(frames_of("incomplete-max-output-tokens.sse"))
    finished = events[-1].payload
    assert (events[-1].kind, finished.status, finished.reason, finished.raw_reason) == (
        "run.finished", "incomplete", "max_tokens", "max_output_tokens")


def test_quota_failure_in_a_200_stream_is_one_error_then_failed():
    events = normalize(frames_of("failed-insufficient-quota.sse"))
    assert kinds(events) == ["run.started", "error", "run.finished"]
    error = events[1].payload
    assert (error.error_type, error.code, error.retryable) == (
        "quota_exceeded", "insufficient_quota", False)
    assert (events[-1].payload.status, events[-1].payload.reason,
            events[-1].payload.raw_reason) == ("failed", "error", "insufficient_quota")


def test_flat_spec_shaped_error_event_is_read_too():
    events = normalize(frames_of("error-flat-spec-shape.sse"))
    errors = of_kind(events, "error")
    assert [(e.error_type, e.code, e.retryable) for e in errors] == [
        ("server_error", "server_error", True)]
    assert events[-1].payload.raw_reason == "server_error"


def test_parallel_tool_calls_await_tool_results():
    events = normalize(frames_of("tool-call-parallel.sse"))
    calls = of_kind(events, "tool.call")
    assert [(c.tool_name, c.tool_call_id, c.arguments, c.arguments_valid) for c in calls] == [
        ("get_weather", "call_1", '{"city":"Paris"}', True),
        ("get_weather", "call_2", '{"city":"Rome","unit":"c"}', True)]
    for call in calls:  # the deltas of each call reassemble its arguments
        fragments = [d.arguments for d in of_kind(events, "tool.call.delta")
                     if d.tool_call_id == call.tool_call_id]
        assert "".join(fragments) == call.arguments
    assert [p.tool_call_id for p in of_kind(events, "tool.call.started")] == ["call_1", "call_2"]
    assert (events[-1].kind, events[-1].payload.reason) == ("run.awaiting", "tool_results")
    assert "run.finished" not in kinds(events)


def test_invalid_arguments_are_kept_and_missing_call_id_is_synthesized():
    events = normalize(frames_of("tool-call-invalid-arguments.sse"))
    bad, listed = of_kind(events, "tool.call")
    assert (bad.arguments, bad.arguments_valid) == ('{"query": "unterminated', False)
    assert listed.tool_name == "list_files" and listed.tool_call_id.startswith("mev_")
    again = of_kind(normalize(frames_of("tool-call-invalid-arguments.sse")), "tool.call")[1]
    assert again.tool_call_id == listed.tool_call_id  # deterministic
    other = OpenAIResponsesAdapter("another-run")
    elsewhere = of_kind(normalize(frames_of("tool-call-invalid-arguments.sse"), other),
                        "tool.call")[1]
    assert elsewhere.tool_call_id != listed.tool_call_id


def test_unknown_event_and_item_keep_the_envelope_and_the_stream_goes_on():
    events = normalize(frames_of("unknown-event-and-item.sse"))
    unknown = [e for e in events if e.kind == "unknown"]
    assert [e.payload.provider_type for e in unknown] == [
        "output_item:hologram_call", "response.hologram_call.projecting"]
    assert b"response.hologram_call.projecting" in unknown[1].envelope.body
    assert text_of(events, 1) == "Still here."
    assert events[-1].kind == "run.finished"


def test_resumed_stream_replay_is_deduplicated_by_sequence_number():
    events = normalize(frames_of("resume-replay.sse"))
    assert text_of(events) == "One two three"
    assert [p.status for p in of_kind(events, "run.started")] == ["queued"]
    assert [p.status for p in of_kind(events, "run.status")] == ["in_progress"]
    assert events[-1].kind == "run.finished"


def test_truncated_stream_ends_with_stream_truncated_never_finished():
    events = normalize(frames_of("truncated-mid-text.sse"))
    assert text_of(events) == "This answer is cut off mid"
    assert events[-1].kind == "error" and events[-1].payload.error_type == "stream_truncated"
    assert "run.finished" not in kinds(events) and "text.done" not in kinds(events)


def test_structured_output_is_validated_against_json():
    events = normalize(frames_of("structured-output.sse"))
    (structured,) = of_kind(events, "structured.done")
    assert (structured.json, structured.valid, structured.schema_name) == (
        '{"city":"Paris","population":2102650}', True, "city_facts")


def test_code_interpreter_is_hosted_with_code_and_logs_and_citations_are_kept():
    events = normalize(frames_of("code-interpreter-container-file.sse"))
    (call,) = of_kind(events, "hosted.call")
    (result,) = of_kind(events, "hosted.result")
    assert (call.tool_type, call.executor, call.authority, call.status) == (
        "code_execution", "provider", "provider", "in_progress")
    assert orjson.loads(result.arguments) == {"code": "import math\nprint(math.factorial(20))"}
    assert orjson.loads(result.evidence)["outputs"] == [
        {"type": "logs", "logs": "2432902008176640000\n"}]
    assert not of_kind(events, "tool.call")
    citations = of_kind(events, "citation")
    assert [(c.source_type, c.start, c.end, c.file_id or c.url) for c in citations] == [
        ("container_file", 27, 37, "cfile_1"),
        ("url", 0, 9, "https://en.wikipedia.org/wiki/Factorial")]


def test_computer_call_is_a_tool_call_the_application_runs_and_the_response_awaits_it():
    events = normalize(frames_of("computer-call.sse"))
    (started,) = of_kind(events, "tool.call.started")
    (call,) = of_kind(events, "tool.call")
    assert (started.tool_name, started.tool_call_id) == ("computer", "call_cu_1")
    assert (call.tool_name, call.tool_call_id, call.item_id, call.arguments_valid) == (
        "computer", "call_cu_1", "cu_1", True)
    assert orjson.loads(call.arguments) == {
        "action": {"type": "click", "x": 120, "y": 48, "button": "left"},
        "pending_safety_checks": []}
    assert not of_kind(events, "hosted.call") and not of_kind(events, "hosted.result")
    assert (events[-1].kind, events[-1].payload.reason) == ("run.awaiting", "tool_results")


def test_client_executed_provider_tools_are_tool_calls_with_their_payload():
    # apply_patch, local shell and a shell whose environment is local: the provider asks, the
    # application runs them; a consumer acting on tool.call must get each with its payload.
    events = normalize(frames_of("client-executed-tools.sse"))
    calls = of_kind(events, "tool.call")
    assert [(c.output_index, c.tool_name, c.tool_call_id, c.item_id, c.arguments_valid)
            for c in calls] == [
        (0, "apply_patch", "call_ap_1", "apc_1", True),
        (1, "local_shell", "call_ls_2", "lsh_2", True),
        (2, "shell", "call_sh_3", "sh_3", True)]
    assert orjson.loads(calls[0].arguments) == {"operation": {
        "type": "update_file", "path": "src/app.py",
        "diff": "@@ def greet(name):\n-    print('hi')\n+    print(f'hello, {name}')\n"}}
    assert orjson.loads(calls[1].arguments)["action"]["command"] == ["pytest", "-q"]
    assert orjson.loads(calls[2].arguments) == {
        "action": {"commands": ["git status --short"], "timeout_ms": None,
                   "max_output_length": None},
        "environment": {"type": "local"}}
    assert [p.tool_call_id for p in of_kind(events, "tool.call.started")] == [
        "call_ap_1", "call_ls_2", "call_sh_3"]
    # The diff streams as text, not as argument JSON: no tool.call.delta to misassemble.
    assert of_kind(events, "tool.call.delta") == []
    assert not of_kind(events, "hosted.call") and not of_kind(events, "hosted.result")
    assert (events[-1].kind, events[-1].payload.reason) == ("run.awaiting", "tool_results")


def test_the_output_of_a_client_executed_tool_is_a_tool_result():
    # A response listing that holds the application's output items (a stored conversation, a
    # poll of a response with its input echoed): what the client ran is a tool.result.
    call = {"id": "apc_1", "type": "apply_patch_call", "status": "completed",
            "call_id": "call_ap_1", "operation": {"type": "delete_file", "path": "old.txt"}}
    output = {"id": "apco_1", "type": "apply_patch_call_output", "status": "failed",
              "call_id": "call_ap_1", "output": "old.txt: no such file"}
    shot = {"id": "cuo_1", "type": "computer_call_output", "call_id": "call_cu_9",
            "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AA=="}}
    poll = {"id": "resp_p", "object": "response", "status": "completed", "model": "gpt-5",
            "output": [call, output, shot]}
    events = normalize([frame(poll, 0, transport="poll")])
    results = of_kind(events, "tool.result")
    assert [(r.tool_name, r.tool_call_id, r.output, r.is_error) for r in results] == [
        ("apply_patch", "call_ap_1", "old.txt: no such file", True),
        ("computer", "call_cu_9",
         '{"type":"computer_screenshot","image_url":"data:image/png;base64,AA=="}', False)]
    assert not of_kind(events, "hosted.result")


# --- polled objects -------------------------------------------------------------------------


def test_background_polls_emit_status_changes_and_only_new_text():
    adapter = OpenAIResponsesAdapter(RUN)
    events: list[ModelEvent] = []
    polls = ["poll-1-queued.json", "poll-2-in-progress-partial.json",
             "poll-2-in-progress-partial.json", "poll-3-completed.json", "poll-3-completed.json"]
    for n, name in enumerate(polls):
        (poll,) = frames_of(name, stream_id=f"p{n}")
        assert poll.transport == "poll"
        events += adapter.feed(poll)
    events += adapter.close()
    assert kinds(events) == [
        "run.started", "run.status", "message.started", "text.delta", "text.delta", "text.done",
        "message.finished", "usage", "run.finished"]
    assert [p.text for p in of_kind(events, "text.delta")] == ["The answer", " is 42."]
    assert of_kind(events, "text.done")[0].text == "The answer is 42."
    snapshot = paths.ADAPTER_SNAPSHOTS / "openai-responses" / "background-polls.jsonl"
    assert_matches_snapshot(snapshot, events)


def test_cancelled_poll_finishes_cancelled():
    events = normalize(frames_of("poll-cancelled.json"))
    assert kinds(events) == ["run.started", "run.finished"]
    assert (events[-1].payload.status, events[-1].payload.reason) == ("cancelled", "cancelled")


def test_http_error_body_is_an_error_and_a_failed_finish():
    events = normalize(frames_of("http-error-rate-limit.json", http_status=429))
    assert kinds(events) == ["error", "run.finished"]
    error = events[0].payload
    assert (error.code, error.http_status, error.retryable) == ("rate_limit_exceeded", 429, True)
    assert events[-1].payload.raw_reason == "rate_limit_exceeded"
    assert_matches_snapshot(expected_of(FIXTURES / "http-error-rate-limit.json"), events)


# --- hostile input --------------------------------------------------------------------------


def test_malformed_frame_is_an_error_and_the_stream_goes_on():
    events = normalize(stream(CREATED, ADDED, delta("a", 2), b'{"type": "response.output_te',
                              delta("b", 3), completed(4, "ab")))
    errors = of_kind(events, "error")
    assert [e.error_type for e in errors] == ["malformed_frame"]
    assert text_of(events) == "ab" and events[-1].kind == "run.finished"


def test_duplicate_frames_and_replayed_sequence_numbers_emit_nothing_twice():
    frames = stream(CREATED, ADDED, delta("a", 2), delta("b", 3), completed(4, "ab"))
    adapter = OpenAIResponsesAdapter(RUN)
    events: list[ModelEvent] = []
    for f in [frames[0], frames[1], frames[2], frames[2], frames[3], frames[1], frames[4]]:
        events += adapter.feed(f)
    # The same event under another frame id (a reconnect overlap): deduped by sequence_number.
    events += adapter.feed(frame(delta("b", 3), 99))
    events += adapter.feed(frame(CREATED, 98))
    events += adapter.close()
    assert text_of(events) == "ab"
    assert kinds(events).count("run.started") == 1 and kinds(events).count("run.finished") == 1
    assert len({e.event_id for e in events}) == len(events)


def test_a_call_cut_short_before_the_next_one_starts_is_reported():
    second = {"type": "response.created", "sequence_number": 0,
              "response": {"id": "resp_next", "status": "in_progress", "model": "gpt-5",
                           "output": []}}
    events = normalize(stream(CREATED, ADDED, delta("a", 2), second))
    assert kinds(events)[-3:] == ["error", "run.started", "error"]
    cut, last = events[-3].payload, events[-1].payload
    assert cut.error_type == last.error_type == "stream_truncated" and "resp_h" in cut.message


def test_next_response_without_its_created_event_is_still_a_new_call():
    finished = completed(4, "ab")
    next_in_progress = {"type": "response.in_progress", "sequence_number": 1,
                        "response": {"id": "resp_next", "status": "in_progress", "output": []}}
    next_delta = {**delta("c", 2), "item_id": "msg_n"}
    events = normalize(stream(CREATED, ADDED, delta("a", 2), delta("b", 3), finished,
                              next_in_progress, next_delta))
    assert [p.provider_object_id for p in of_kind(events, "run.started")] == [
        "resp_h", "resp_next"]
    assert [p.text for p in of_kind(events, "text.delta")] == ["a", "b", "c"]
    # Its numbering starts at 1: response.created (0) is missing, and that is said once.
    (gap,) = [e for e in of_kind(events, "error") if e.error_type == "sequence_gap"]
    assert "resp_next" in gap.message and "sequence_number 0 never" in gap.message


def test_non_utf8_bytes_are_replaced_and_reported():
    body = b'{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_h",' \
           b'"output_index":0,"content_index":0,"delta":"caf\xe9"}'
    events = normalize(stream(CREATED, ADDED, body, completed(3, "caf\ufffd")))
    assert [e.error_type for e in of_kind(events, "error")] == ["invalid_utf8"]
    assert text_of(events) == "caf\ufffd" and events[-1].kind == "run.finished"


def test_garbage_bytes_that_are_not_json_at_all_are_malformed():
    events = normalize(stream(CREATED, b"\xff\xfe\x00garbage", completed(1, "")))
    assert [e.error_type for e in of_kind(events, "error")] == ["malformed_frame"]


def test_huge_delta_passes_whole():
    huge = "x" * 2_000_000
    events = normalize(stream(CREATED, ADDED, delta(huge, 2), completed(3, huge)))
    assert max(weight(e) for e in events) <= PIECE_BYTES + 3  # cut to fit Kafka records
    events = assemble(events)
    assert text_of(events) == huge
    assert of_kind(events, "text.done")[0].text == huge


@pytest.mark.parametrize("order", [(0, 2, 1, 3), (2, 0, 1, 3), (0, 2)],
                         ids=["released-by-feed", "held-first", "released-by-close"])
def test_a_huge_delta_held_for_reordering_is_cut_when_released(order: tuple[int, ...]):
    # The reorder window releases a held frame's events with a later frame's, or at close:
    # they are cut into pieces as the huge frame's own feed cuts them, never one record too
    # large for Kafka.
    huge = "x" * 2_000_000
    frames = stream(CREATED, ADDED, delta(huge, 2), completed(3, huge))
    events = normalize([frames[i] for i in order])
    assert max(weight(e) for e in events) <= PIECE_BYTES + 3
    assert text_of(assemble(events)) == huge


def test_done_sentinel_from_compatible_servers_is_ignored():
    events = normalize(stream(CREATED, ADDED, delta("a", 2), completed(3, "a"), b"[DONE]"))
    assert "error" not in kinds(events) and "unknown" not in kinds(events)


def test_unexpected_field_shapes_never_raise():
    odd = [{"type": "response.output_item.added", "output_index": 0, "item": None},
           {"type": "response.output_text.delta", "output_index": "zero", "delta": 5},
           {"type": "response.content_part.done", "part": []},
           {"type": "response.completed", "response": "nope"},
           {"type": "response.output_item.done", "output_index": 1,
            "item": {"type": "message", "content": "not a list"}},
           ["a", "list"], "a string", 42]
    events = normalize(stream(CREATED, *odd))
    assert "run.finished" not in kinds(events)  # a lifecycle event without its object ends nothing
    assert events[-1].payload.error_type == "stream_truncated"


@pytest.mark.parametrize("envelope", [{"object": "event"}, {}], ids=["object-event", "no-object"])
def test_webhook_notification_is_not_mistaken_for_the_stream_event(envelope):
    # A webhook names the event and the response id only; the gateway fetches the object, whose
    # poll frame carries the terminal state. The notification itself must end nothing and must
    # not flag the run (it is understood, not unknown).
    webhook = {"id": "evt_1", "created_at": 1750861210, "type": "response.completed",
               "data": {"id": "resp_h"}, **envelope}
    events = normalize(stream(CREATED, webhook))
    assert "run.finished" not in kinds(events)
    assert "unknown" not in kinds(events)
    assert events[-1].payload.error_type == "stream_truncated"


def test_adapter_state_pickles_mid_stream():
    frames = stream(CREATED, ADDED, delta("a", 2), delta("b", 3), completed(4, "ab"))
    adapter = OpenAIResponsesAdapter(RUN)
    first = adapter.feed(frames[0]) + adapter.feed(frames[1]) + adapter.feed(frames[2])
    restored = pickle.loads(pickle.dumps(adapter))
    rest = restored.feed(frames[2]) + restored.feed(frames[3]) + restored.feed(frames[4])
    rest += restored.close()
    assert text_of(first + rest) == "ab" and rest[-1].kind == "run.finished"


def test_event_ids_are_deterministic():
    one = normalize(frames_of("tool-call-parallel.sse"))
    two = normalize(frames_of("tool-call-parallel.sse"))
    assert [e.event_id for e in one] == [e.event_id for e in two]


def test_recognizes_responses_documents_only():
    assert OpenAIResponsesAdapter.recognizes(CREATED)
    assert OpenAIResponsesAdapter.recognizes({"object": "response", "id": "resp_1"})
    assert OpenAIResponsesAdapter.recognizes({"type": "error", "sequence_number": 2, "error": {}})
    assert not OpenAIResponsesAdapter.recognizes({"type": "error", "error": {}})  # Anthropic's
    assert not OpenAIResponsesAdapter.recognizes({"object": "chat.completion.chunk"})
    assert not OpenAIResponsesAdapter.recognizes({"type": "message_start"})


# --- frames out of order (§1.1: sequence_number rises by one per event of a response) -------

SEQUENCED_FIXTURES = [name for name in FIXTURE_STREAMS
                      if b'"sequence_number"' in (FIXTURES / name).read_bytes()]


def bounded_shuffle(frames: list, displacement: int, rng: random.Random) -> list:
    """A permutation in which no frame moves `displacement` places or more: sort by position
    plus a random offset below `displacement`."""
    keyed = [(n + rng.random() * displacement, n) for n in range(len(frames))]
    return [frames[n] for _, n in sorted(keyed)]


def shuffled_parts(bodies: list[bytes], displacement: int, rng: random.Random
                   ) -> list[list[int]]:
    """An arrival order (frame indices) per response, split at each response.created: each
    response's frames shuffled within it (reordering is repaired within a response). From the
    second response on, one of its lifecycle frames (they carry its id) is made to come first:
    a delta that arrives before any frame of its response said which response it is cannot be
    told from a late replay of the previous response, and is dropped (its loss is then reported
    as a gap)."""
    parts: list[list[int]] = []
    for n, body in enumerate(bodies):
        if not parts or b'"type":"response.created"' in body:
            parts.append([])
        parts[-1].append(n)
    for n, part in enumerate(parts):
        part[:] = bounded_shuffle(part, displacement, rng)
        if n:
            first = next(i for i, f in enumerate(part) if b'"response":{' in bodies[f])
            part.insert(0, part.pop(first))
    return parts


def shuffled(frames: list[ProviderFrame], displacement: int, rng: random.Random
             ) -> list[ProviderFrame]:
    parts = shuffled_parts([f.body for f in frames], displacement, rng)
    return [frames[n] for part in parts for n in part]


def replayed(f: ProviderFrame) -> ProviderFrame:
    """The same event re-serialised under another frame id, as a resumed stream replays it."""
    doc = orjson.loads(f.body)
    if not isinstance(doc, dict):
        return f
    return dataclasses.replace(f, frame_id=f"replay:{f.frame_id}",
                               body=orjson.dumps(dict(reversed(list(doc.items())))))


def projections(events: list[ModelEvent]) -> list[dict]:
    return [event_projection(e) for e in events]


def gaps(events: list[ModelEvent]) -> list:
    return [e for e in events if e.kind == "error" and e.payload.error_type == "sequence_gap"]


@pytest.mark.parametrize("name", [n for n in SEQUENCED_FIXTURES if n != "resume-replay.sse"])
@pytest.mark.parametrize("seed", range(5))
def test_frames_shuffled_within_the_window_give_the_same_events(name, seed):
    frames = frames_of(name)
    in_order = normalize(frames)
    again = normalize(shuffled(frames, REORDER_WINDOW, random.Random(seed)))
    # The very same events: kinds and payloads, and also ids, sources and envelopes (each
    # event of a held frame is made in that frame's own context).
    assert projections(again) == projections(in_order)
    assert again == in_order
    assert not gaps(again)


def test_events_of_a_held_frame_carry_its_own_frame_id_cursor_envelope_and_time():
    docs = [CREATED, ADDED, delta("a", 2), delta("b", 3), delta("c", 4), completed(5, "abc")]
    frames = [dataclasses.replace(frame(doc, n), cursor=f"cur{n}", received_at=1000 + n)
              for n, doc in enumerate(docs)]
    by_id = {f.frame_id: f for f in frames}
    adapter = OpenAIResponsesAdapter(RUN)
    early = adapter.feed(frames[0]) + adapter.feed(frames[1])
    assert adapter.feed(frames[4]) == [] and adapter.feed(frames[3]) == []  # held
    assert adapter.feed(replayed(frames[3])) == []  # a second copy: the first one stays held
    released = adapter.feed(frames[2])  # closes the gap: 2, then the held 3 and 4
    assert [e.payload.text for e in released if e.kind == "text.delta"] == ["a", "b", "c"]
    assert {e.source.frame_id for e in released} == {"s0:2", "s0:3", "s0:4"}
    events = early + released + adapter.feed(frames[5]) + adapter.close()
    for e in events:
        f = by_id[e.source.frame_id]
        assert (e.source.cursor, e.received_at, e.envelope.body) == (
            f.cursor, f.received_at, f.body)
    assert events == normalize(frames)
    assert text_of(events) == "abc" and events[-1].kind == "run.finished"


def test_a_frame_early_before_response_created_waits_for_it():
    frames = stream(CREATED, ADDED, delta("a", 2), completed(3, "a"))
    events = normalize([frames[1], frames[0], frames[3], frames[2]])
    assert events == normalize(frames)


def test_a_gap_is_reported_once_at_the_end_of_input_and_the_stream_goes_on():
    # seq 3 never comes; the terminal event is held behind it until the input ends.
    frames = stream(CREATED, ADDED, delta("a", 2), delta("c", 4), completed(5, "abc"))
    adapter = OpenAIResponsesAdapter(RUN)
    fed = [adapter.feed(f) for f in frames]
    assert [kinds(out) for out in fed[3:]] == [[], []]  # held, waiting for 3
    closing = adapter.close()
    (gap,) = gaps(closing)
    assert (gap.payload.retryable, gap.source.frame_id) == (False, "s0:3")  # frame after it
    assert "resp_h" in gap.payload.message and "sequence_number 3 never" in gap.payload.message
    assert kinds(closing) == ["error", "text.delta", "text.done", "message.finished", "usage",
                              "run.finished"]  # no stream_truncated: the terminal event came
    assert [p.text for p in of_kind(closing, "text.delta")] == ["c"]
    assert of_kind(closing, "text.done")[0].text == "abc"  # the provider's own final text


def test_a_gap_is_reported_when_the_next_response_begins():
    second = {"type": "response.created", "sequence_number": 0,
              "response": {"id": "resp_next", "status": "in_progress", "model": "gpt-5",
                           "output": []}}
    adapter = OpenAIResponsesAdapter(RUN)
    for f in stream(CREATED, ADDED, delta("a", 2), delta("c", 4), completed(5, "ac")):
        adapter.feed(f)
    out = adapter.feed(frame(second, 9))
    # Nothing more of resp_h can come: its held frames first, gap reported, then resp_next.
    assert kinds(out) == ["error", "text.delta", "text.done", "message.finished", "usage",
                          "run.finished", "run.started"]
    assert "resp_h" in out[0].payload.message and out[-1].payload.provider_object_id == "resp_next"
    assert [e.source.frame_id for e in out] == ["s0:3"] * 2 + ["s0:4"] * 4 + ["s0:9"]
    assert gaps(adapter.close()) == []


def test_window_overflow_reports_the_gap_and_a_late_frame_after_it_is_dropped():
    texts = [f"<{n}>" for n in range(REORDER_WINDOW + 1)]
    early = [delta(t, 4 + n) for n, t in enumerate(texts)]  # seq 3 is late
    adapter = OpenAIResponsesAdapter(RUN)
    events = adapter.feed(frame(CREATED, 0)) + adapter.feed(frame(ADDED, 1))
    events += adapter.feed(frame(delta("a", 2), 2))
    for n, doc in enumerate(early[:REORDER_WINDOW]):
        assert adapter.feed(frame(doc, 10 + n)) == []  # up to REORDER_WINDOW frames wait
    overflow = adapter.feed(frame(early[-1], 99))  # one more: the wait is over
    (gap,) = gaps(overflow)
    assert "sequence_number 3 never" in gap.payload.message
    assert [p.text for p in of_kind(overflow, "text.delta")] == texts
    # Decided: a frame whose gap was already reported is dropped like a duplicate. Its events
    # would come after those of the frames that followed it, so the deltas would no longer
    # reassemble; the sequence_gap error stands as the record (the frame itself stays in the
    # frame log).
    assert adapter.feed(frame(delta("b", 3), 50)) == []
    events += overflow + adapter.feed(frame(completed(4 + len(texts), "whatever"), 60))
    events += adapter.close()
    assert text_of(events) == "a" + "".join(texts)
    assert len(gaps(events)) == 1 and events[-1].kind == "run.finished"


def test_a_gap_never_closing_does_not_hold_the_stream_beyond_the_window():
    adapter = OpenAIResponsesAdapter(RUN)
    adapter.feed(frame(CREATED, 0))
    adapter.feed(frame(ADDED, 1))
    outs = [adapter.feed(frame(delta(".", seq), seq))  # seq 2 never comes
            for seq in range(3, 3 + 3 * REORDER_WINDOW)]
    assert not any(outs[:REORDER_WINDOW])  # held while the gap may still close
    assert all(outs[REORDER_WINDOW:])  # then reported, and from there on in order at once
    out = sum(outs, [])
    assert len(gaps(out)) == 1 and len(of_kind(out, "text.delta")) == 3 * REORDER_WINDOW


def test_frames_without_sequence_numbers_pass_straight_through():
    bare = [{k: v for k, v in d.items() if k != "sequence_number"}
            for d in (CREATED, ADDED, delta("b", 0), delta("a", 0))]
    adapter = OpenAIResponsesAdapter(RUN)
    outs = [adapter.feed(f) for f in stream(*bare)]
    assert [p.text for out in outs for p in of_kind(out, "text.delta")] == ["b", "a"]
    assert all(outs) and not gaps(sum(outs, []))


def test_adapter_state_pickles_while_frames_are_held():
    frames = stream(CREATED, ADDED, delta("a", 2), delta("b", 3), completed(4, "ab"))
    adapter = OpenAIResponsesAdapter(RUN)
    first = adapter.feed(frames[0]) + adapter.feed(frames[1]) + adapter.feed(frames[3])
    restored = pickle.loads(pickle.dumps(adapter))
    rest = restored.feed(frames[4]) + restored.feed(frames[2]) + restored.close()
    assert first + rest == normalize(frames)


def test_a_late_replay_of_a_finished_response_changes_nothing():
    frames = frames_of("tool-loop-two-responses.sse")
    in_order = normalize(frames)
    first_created = frames[0]
    second_start = next(n for n, f in enumerate(frames) if n and b"response.created" in f.body)
    stale = dataclasses.replace(frames[second_start - 1], frame_id="late:1")  # resp 1 completed
    stale_created = dataclasses.replace(first_created, frame_id="late:0")
    mixed = frames[:second_start + 3] + [stale_created, stale] + frames[second_start + 3:]
    assert projections(normalize(mixed)) == projections(in_order)


FIXTURE_BODIES = {name: [f.body for f in frames_of(name)] for name in SEQUENCED_FIXTURES}


@st.composite
def disorderly(draw):
    """A fixture and an arrival order of its frames (index, re-serialised?): shuffled within
    each response with a bounded displacement, with frames delivered again at random later
    moments — the same frame (a retried delivery: anywhere later), or the same event
    re-serialised (a resumed stream's replay, §9: later within its own response, which is all a
    resume replays)."""
    name = draw(st.sampled_from(SEQUENCED_FIXTURES))
    rng = draw(st.randoms(use_true_random=False))
    displacement = draw(st.integers(0, REORDER_WINDOW))
    parts = [[(n, False) for n in part]
             for part in shuffled_parts(FIXTURE_BODIES[name], displacement, rng)]
    for _ in range(draw(st.integers(0, 6))):
        part = parts[rng.randrange(len(parts))]
        at = rng.randrange(len(part))
        part.insert(rng.randint(at + 1, len(part)), (part[at][0], True))
    order = [entry for part in parts for entry in part]
    for _ in range(draw(st.integers(0, 6))):
        at = rng.randrange(len(order))
        order.insert(rng.randint(at + 1, len(order)), order[at])
    return name, order


@settings(max_examples=300, deadline=None)
@given(disorderly())
def test_reordered_and_duplicated_frames_give_the_events_of_the_stream_in_order(case):
    name, order = case
    frames = frames_of(name)
    arrivals = [replayed(frames[n]) if replay else frames[n] for n, replay in order]
    assert projections(normalize(arrivals)) == projections(normalize(frames))


def test_a_second_call_cut_after_the_first_was_closed_is_truncated_too():
    # One adapter follows every call of a run (a tool loop); a close ends one call's input, and
    # the next call that is cut must be reported at its own close.
    adapter = OpenAIResponsesAdapter(RUN)
    first = normalize(frames_of("tool-call-parallel.sse"), adapter)
    assert "error" not in kinds(first)
    cut = frames_of("truncated-mid-text.sse", stream_id="s1")
    second = normalize(cut, adapter)
    assert kinds(second)[0] == "run.started"
    assert second[-1].payload.error_type == "stream_truncated"
    assert adapter.close() == []  # closed twice without input in between: nothing again


# --- ids that rotate (issue #12): one stream numbered 0..n is one response -------------------


def test_ids_rotating_on_every_event_are_one_response_correlated_by_output_index():
    # GitHub Copilot's endpoint (and proxies before it) gives every event new item ids, and
    # sanitized captures a new response id on every lifecycle event too; sequence_number runs
    # 0..n without a gap and one response.completed ends it.
    events = normalize(frames_of("rotating-ids.sse"))
    assert [p.provider_object_id for p in of_kind(events, "run.started")] == ["resp_Zk1"]
    assert of_kind(events, "error") == []
    assert [p.text for p in of_kind(events, "reasoning.delta")] == ["Two plus two", " is four."]
    assert [p.text for p in of_kind(events, "reasoning.done")] == ["Two plus two is four."]
    assert [p.text for p in of_kind(events, "text.delta")] == ["2 + 2", " = ", "4"]
    assert [p.text for p in of_kind(events, "text.done")] == ["2 + 2 = 4"]
    assert kinds(events).count("message.started") == kinds(events).count("message.finished") == 1
    # Each item keeps the id it was announced with, whatever later events call it.
    assert {(e.payload.output_index, e.payload.item_id) for e in events
            if e.kind.startswith(("reasoning.", "text.", "message."))} == {
        (0, "rs_a1"), (1, "msg_h8")}
    (usage,) = of_kind(events, "usage")
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (18, 27, 45)
    assert kinds(events)[-1] == "run.finished"
    assert (events[-1].payload.status, events[-1].payload.reason) == ("completed", "end_turn")


def test_rotating_ids_then_the_next_response_of_the_tool_loop_is_two_calls():
    # What really starts a response: response.created after the terminal event (numbering
    # restarts at 0). The second stream's ids rotate too.
    adapter = OpenAIResponsesAdapter(RUN)
    frames = frames_of("rotating-ids.sse") + frames_of("rotating-ids.sse", stream_id="s1")
    bodies = [f.body.replace(b"resp_", b"resp_2") if f.frame_id.startswith("s1") else f.body
              for f in frames]
    frames = [dataclasses.replace(f, body=b) for f, b in zip(frames, bodies)]
    events = normalize(frames, adapter)
    assert [p.provider_object_id for p in of_kind(events, "run.started")] == [
        "resp_Zk1", "resp_2Zk1"]
    assert of_kind(events, "error") == []
    assert [p.text for p in of_kind(events, "text.done")] == ["2 + 2 = 4"] * 2
    assert kinds(events).count("run.finished") == 2 and kinds(events)[-1] == "run.finished"


def test_a_late_replay_of_a_rotated_lifecycle_event_is_a_duplicate():
    frames = frames_of("rotating-ids.sse")
    in_order = normalize(frames)
    # The in_progress event (seq 1, its own rotated id) delivered again after the deltas, as a
    # resumed stream replays it re-serialised: same response, number already seen.
    again = frames[:8] + [replayed(frames[1])] + frames[8:]
    assert projections(normalize(again)) == projections(in_order)
    assert kinds(in_order).count("run.started") == 1 and not of_kind(in_order, "error")


def test_mistyped_fields_are_malformed_frames_and_the_stream_goes_on():
    odd_part = {**delta("x", 2), "content_index": [0]}  # unhashable where an int belongs
    no_item = {"type": "response.output_item.done", "sequence_number": 3, "output_index": 1,
               "item": "nope"}
    events = normalize(stream(CREATED, ADDED, odd_part, no_item, delta("ab", 4),
                              completed(5, "ab")))
    errors = of_kind(events, "error")
    # A field the adapter checks is named (malformed_frame); one it does not check but could
    # not read is the taxonomy's unexpected_shape (adapters/base.py). Neither stops the stream.
    assert [e.error_type for e in errors] == ["unexpected_shape", "malformed_frame"]
    assert "s0:2: response.output_text.delta could not be read (TypeError" in errors[0].message
    assert errors[1].message == (
        "frame s0:3: response.output_item.done.item is a str, not an object")
    assert text_of(events) == "ab" and events[-1].kind == "run.finished"


def test_a_function_call_without_arguments_is_the_empty_object():
    added = {"type": "response.output_item.added", "sequence_number": 1, "output_index": 0,
             "item": {"id": "fc_1", "type": "function_call", "status": "in_progress",
                      "call_id": "call_now", "name": "get_time", "arguments": ""}}
    done = {**added, "type": "response.output_item.done", "sequence_number": 2,
            "item": {**added["item"], "status": "completed"}}
    events = normalize(stream(CREATED, added, done))
    (call,) = of_kind(events, "tool.call")
    assert (call.tool_name, call.tool_call_id, call.arguments, call.arguments_valid) == (
        "get_time", "call_now", "{}", True)
