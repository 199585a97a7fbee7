"""What the adapters now share with adapters/base.py and schemas/vocabulary.py (issue #12),
each on a stream written for it: a raw value the vocabulary does not name becomes its named
fallback with the raw value kept (never a "normalized" value invented from the raw string),
`valid_for` is the base's, base64 media is adapters/encodings.py's, `[DONE]` is base's
``is_done``, and a Responses handler that raises is reported by the base's guard."""

from __future__ import annotations

import base64
from dataclasses import replace

import orjson
import pytest

from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.registry import ADAPTERS
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import BUNDLE_FRAME_HEADER
from modelevents.schemas.vocabulary_check import check_event
from tests.helpers import of_kind
from tests.paths import FIXTURES

RUN = "run-shared"


def sse(*docs: dict | bytes) -> bytes:
    return b"".join(b"data: " + (d if isinstance(d, bytes) else orjson.dumps(d)) + b"\n\n"
                    for d in docs)


def normalize(api: str, body: bytes, model: str | None = None) -> list[ModelEvent]:
    adapter = ADAPTERS[api](RUN)
    if model is not None:
        adapter.model = model
    events: list[ModelEvent] = []
    for frame in frames_from_bytes(body, run_key=RUN, provider=ADAPTERS[api].default_provider,
                                   api=api, stream_id="s0"):
        events += adapter.feed(frame)
    events += adapter.close()
    for event in events:  # every event of these streams is inside the closed vocabulary
        assert check_event(event) == [], (event.kind, event.payload)
    return events


# --- OpenAI Chat Completions -----------------------------------------------------------------

def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-x",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_chat_unknown_finish_reason_is_other_with_the_raw_reason_kept() -> None:
    events = normalize("openai-chat", sse(chunk({"role": "assistant", "content": "hi"}),
                                          chunk({}, "eos_token"), b"[DONE]"))
    [finished] = of_kind(events, "run.finished")
    assert (finished.status, finished.reason, finished.raw_reason) == (
        "incomplete", "other", "eos_token")


def test_chat_role_is_the_assistants_whatever_a_server_sends() -> None:
    events = normalize("openai-chat", sse(chunk({"role": "model", "content": "hi"}),
                                          chunk({}, "stop"), b"[DONE]"))
    assert [m.role for m in of_kind(events, "message.started")] == ["assistant"]


def test_chat_done_with_white_space_ends_the_stream_as_done_does() -> None:
    body = sse(chunk({"role": "assistant", "content": "hi"}), chunk({}, "stop")) + \
        b"data:  [DONE] \n\n"
    events = normalize("openai-chat", body)
    assert not of_kind(events, "error")  # neither malformed nor truncated
    assert of_kind(events, "run.finished")[0].reason == "end_turn"


def test_chat_tool_call_with_an_array_for_arguments_is_invalid() -> None:
    # The one rule of base.tool_arguments: valid only as a JSON object (arguments are named).
    call = {"tool_calls": [{"index": 0, "id": "t1", "type": "function",
                            "function": {"name": "f", "arguments": "[1]"}}]}
    events = normalize("openai-chat", sse(chunk({"role": "assistant", **call}),
                                          chunk({}, "tool_calls"), b"[DONE]"))
    [tool] = of_kind(events, "tool.call")
    assert (tool.arguments, tool.arguments_valid) == ("[1]", False)


# --- Anthropic Messages ----------------------------------------------------------------------

def message(*blocks: list[dict], stop: str = "end_turn", model: str = "claude-x") -> bytes:
    docs: list[dict] = [{"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
        "usage": {"input_tokens": 1, "output_tokens": 0}}}]
    for block in blocks:
        docs += block
    docs += [{"type": "message_delta", "delta": {"stop_reason": stop},
              "usage": {"output_tokens": 1}}, {"type": "message_stop"}]
    return sse(*docs)


def test_claude_unknown_server_tool_is_other_with_its_name_kept() -> None:
    tool = [{"type": "content_block_start", "index": 0, "content_block": {
                "type": "server_tool_use", "id": "srv_1", "name": "crystal_ball", "input": {}}},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": {
                "type": "crystal_ball_tool_result", "tool_use_id": "srv_1", "content": []}},
            {"type": "content_block_stop", "index": 1}]
    events = normalize("anthropic-messages", message(tool))
    [call] = of_kind(events, "hosted.call")
    assert (call.tool_type, call.name) == ("other", "crystal_ball")
    [result] = of_kind(events, "hosted.result")
    assert (result.tool_type, result.call_id) == ("other", "srv_1")


def test_claude_result_of_an_unseen_call_keeps_its_block_type_as_name() -> None:
    result = [{"type": "content_block_start", "index": 0, "content_block": {
                  "type": "crystal_ball_tool_result", "tool_use_id": "srv_9", "content": []}},
              {"type": "content_block_stop", "index": 0}]
    [hosted] = of_kind(normalize("anthropic-messages", message(result)), "hosted.result")
    assert (hosted.tool_type, hosted.name) == ("other", "crystal_ball_tool_result")


def test_claude_unknown_citation_location_is_other() -> None:
    text = [{"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {
                "type": "citations_delta", "citation": {
                    "type": "hologram_location", "cited_text": "x"}}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "cited"}},
            {"type": "content_block_stop", "index": 0}]
    [citation] = of_kind(normalize("anthropic-messages", message(text)), "citation")
    assert citation.source_type == "other"


def test_claude_thinking_is_valid_for_the_base_helpers_value() -> None:
    thinking = [{"type": "content_block_start", "index": 0,
                 "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "thinking_delta", "thinking": "hm"}},
                {"type": "content_block_delta", "index": 0,
                 "delta": {"type": "signature_delta", "signature": "sig"}},
                {"type": "content_block_stop", "index": 0}]
    [done] = of_kind(normalize("anthropic-messages", message(thinking)), "reasoning.done")
    assert done.valid_for == "anthropic/claude-x"


# --- OpenAI Responses ------------------------------------------------------------------------

def responses(*events: dict) -> bytes:
    created = {"type": "response.created", "response": {
        "id": "resp_1", "object": "response", "status": "in_progress", "model": "gpt-x",
        "output": []}}
    docs = [created, *events, {"type": "response.completed", "response": {
        "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-x",
        "output": []}}]
    return sse(*({**doc, "sequence_number": n} for n, doc in enumerate(docs)))


def test_responses_audio_that_is_not_base64_is_reported_never_dropped() -> None:
    item = {"type": "message", "id": "msg_1", "role": "assistant", "content": []}
    events = normalize("openai-responses", responses(
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.audio.delta", "output_index": 0, "item_id": "msg_1",
         "delta": "not base64 at all!"},
        {"type": "response.audio.done", "output_index": 0, "item_id": "msg_1"}))
    assert not of_kind(events, "media.done")
    assert [e.error_type for e in of_kind(events, "error")] == ["malformed_media"]


def test_responses_image_in_the_url_safe_alphabet_is_decoded() -> None:
    png = bytes(range(250, 256)) * 3  # bytes whose base64 needs "+" and "/"
    url_safe = base64.urlsafe_b64encode(png).decode().rstrip("=")
    assert "-" in url_safe or "_" in url_safe
    item = {"type": "image_generation_call", "id": "ig_1", "status": "completed",
            "result": url_safe}
    events = normalize("openai-responses", responses(
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**item, "status": "generating", "result": None}},
        {"type": "response.output_item.done", "output_index": 0, "item": item}))
    [media] = of_kind(events, "media.done")
    assert media.data == png
    # "generating" is work under way: in_progress in the vocabulary.
    assert [h.status for h in of_kind(events, "hosted.call")] == ["in_progress"]


def test_responses_result_of_an_unseen_call_has_a_vocabulary_status() -> None:
    # A status word the vocabulary does not have is no status, not the raw word.
    item = {"type": "tool_search_output", "id": "ts_1", "call_id": "ts_0",
            "status": "pondering", "tools": []}
    events = normalize("openai-responses", responses(
        {"type": "response.output_item.done", "output_index": 0, "item": item}))
    [result] = of_kind(events, "hosted.result")
    assert (result.tool_type, result.call_id, result.status) == ("tool_search", "ts_0", None)


def test_responses_file_path_annotation_cites_a_file() -> None:
    annotation = {"type": "file_path", "file_id": "file_1", "index": 3}
    part = {"type": "output_text", "text": "see it", "annotations": [annotation]}
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [part]}
    events = normalize("openai-responses", responses(
        {"type": "response.output_item.done", "output_index": 0, "item": item}))
    [citation] = of_kind(events, "citation")
    assert (citation.source_type, citation.file_id, citation.start) == ("file", "file_1", 3)


def test_responses_handler_that_raises_is_the_base_guards_unexpected_shape() -> None:
    events = normalize("openai-responses", responses(
        {"type": "response.output_text.delta", "output_index": 0, "content_index": [0],
         "item_id": "msg_1", "delta": "x"}))
    [error] = of_kind(events, "error")
    assert error.error_type == "unexpected_shape"
    assert "response.output_text.delta could not be read (TypeError" in error.message
    assert error.message.endswith("what the frame gave before it is kept")
    assert of_kind(events, "run.finished")[0].status == "completed"  # the stream went on


def test_responses_image_with_characters_outside_the_alphabet_reads_as_javascript_does() -> None:
    # Sanitized recordings cut a long image with "..." (vercel-ai openai-image-generation-tool):
    # the Vercel AI SDK decodes what remains, skipping the dots; Gemini's strict reading would not.
    png = bytes(range(60))
    text = base64.b64encode(png).decode()
    cut = text[:40] + "..." + text[40:]
    item = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": cut}
    events = normalize("openai-responses", responses(
        {"type": "response.output_item.done", "output_index": 0, "item": item}))
    assert [m.data for m in of_kind(events, "media.done")] == [png]


@pytest.mark.parametrize(("api", "recording"), [
    ("openai-responses", "openai-responses/text-with-usage.sse"),
    ("openai-chat", "openai-chat/reasoning-then-text.sse"),
    ("anthropic-messages", "anthropic-messages/pause-turn-then-continuation.sse"),
    ("gemini-interactions", "gemini-interactions/google-search-cited-event-ids.sse"),
    ("gemini-generate", "gemini-generate/grounding-citations.sse"),
])
def test_run_started_names_the_bundle_its_frames_carry(api, recording):
    """The gateway names a call's bundle on its frames (BUNDLE_FRAME_HEADER); every adapter's
    run.started carries it — pure: from the frame, so replay of frames gives it again — and
    frames without the header give run.started under no bundle."""
    body = (FIXTURES / recording).read_bytes()
    bundle = "bnd-" + "c4" * 32
    plain = frames_from_bytes(body, run_key=RUN, provider="p", api=api)
    tagged = [replace(f, headers={**f.headers, BUNDLE_FRAME_HEADER: bundle}) for f in plain]
    for frames, expected in ((tagged, bundle), (plain, None)):
        adapter = ADAPTERS[api](RUN)
        events = [e for f in frames for e in adapter.feed(f)] + adapter.close()
        started = of_kind(events, "run.started")
        assert started and [p.bundle for p in started] == [expected] * len(started)
