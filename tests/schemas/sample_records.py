"""One record of every contract type and every ModelEvent kind, used to freeze encoded samples
of each released schema version (tests/schemas/samples/<version>/) and in round-trip tests."""

from __future__ import annotations

from modelevents.schemas import events as ev
from modelevents.schemas.frames import FramePiece, ProviderFrame
from modelevents.schemas.run_state import DeadLetter, RunState

PAYLOADS: dict[str, ev.Payload] = {
    "run.started": ev.RunStarted(status="in_progress", provider_object_id="resp_1",
                                 bundle="bnd-" + "5e" * 32),
    "run.status": ev.RunStatus(status="queued", raw_status="queued"),
    "run.awaiting": ev.RunAwaiting(reason="tool_results", raw_reason="tool_use"),
    "run.finished": ev.RunFinished(status="completed", reason="end_turn", raw_reason="end_turn"),
    "message.started": ev.Message(output_index=0, role="assistant", item_id="msg_1"),
    "message.finished": ev.Message(output_index=0, role="assistant", item_id="msg_1",
                                   phase="final_answer"),
    "text.delta": ev.Text(output_index=0, part_index=0, text="Hel", item_id="msg_1"),
    "text.done": ev.Text(output_index=0, part_index=0, text="Hello ✓", item_id="msg_1"),
    "reasoning.delta": ev.Reasoning(output_index=0, part_index=0, form="summary", text="th"),
    "reasoning.done": ev.Reasoning(output_index=0, part_index=0, form="raw", text="thought",
                                   signature="sig", valid_for="anthropic/claude-x"),
    "media.done": ev.Media(output_index=1, mime_type="image/png", data=b"\x89PNG\x00\xff",
                           partial=True),
    "structured.done": ev.Structured(output_index=0, json='{"a": 1}', valid=True,
                                     schema_name="Answer"),
    "tool.call.started": ev.ToolCall(output_index=1, tool_name="get_weather",
                                     tool_call_id="call_1", arguments=""),
    "tool.call.delta": ev.ToolCall(output_index=1, tool_name="get_weather",
                                   tool_call_id="call_1", arguments='{"ci'),
    "tool.call": ev.ToolCall(output_index=1, tool_name="get_weather", tool_call_id="call_1",
                             arguments='{"city": "Oslo"}', arguments_valid=True),
    "tool.result": ev.ToolResult(tool_name="get_weather", tool_call_id="call_1",
                                 output='{"c": 3}'),
    "hosted.call": ev.Hosted(output_index=2, call_id="ws_1", tool_type="web_search",
                             authority="provider", billable_unit="search", quantity=1.0,
                             arguments='{"query": "x"}'),
    "hosted.result": ev.Hosted(output_index=2, call_id="ws_1", tool_type="web_search",
                               authority="provider", status="completed",
                               evidence='{"sources": [{"url": "https://example.com"}]}',
                               trust="untrusted",
                               source_trust={"https://example.com": "untrusted"}),
    "citation": ev.Citation(output_index=0, source_type="url", start=0, end=5,
                            url="https://example.com", title="Example", trust="trusted"),
    "refusal": ev.Refusal(text="I can't help with that.", category="cyber"),
    "approval.requested": ev.Approval(approval_id="apr_1", tool_name="deploy", server="ops"),
    "approval.resolved": ev.Approval(approval_id="apr_1", decision="approved", decider="alice"),
    "usage": ev.Usage(input_tokens=10, output_tokens=5, cache_read_tokens=2, total_tokens=15,
                      server_tool_units={"web_search_requests": 1},
                      iterations='[{"type":"compaction","input_tokens":7,"output_tokens":2},'
                                 '{"type":"message","input_tokens":3,"output_tokens":3}]'),
    "error": ev.Error(error_type="overloaded_error", message="Overloaded", http_status=529,
                      retryable=True),
    "unknown": ev.Unknown(provider_type="response.future_thing.delta"),
    "policy.violation": ev.PolicyViolation(
        violation="blocked_source", note="web_search evidence from a blocked source",
        call_id="ws_1", source="https://evil.example/x"),
}


# The kind whose sample is the first piece of an event cut into pieces (schema v2's piece).
PIECE_KIND = "text.delta"


def model_event(kind: str, seq: int = -1) -> ev.ModelEvent:
    event = ev.ModelEvent(
        event_id=f"evt-{kind}", run_id="run-1", tenant="acme", provider="openai",
        api="openai-responses", model="gpt-5", kind=kind, seq=seq,
        source=ev.EventSource(frame_id="s0:3", index=0, transport="sse", cursor="3"),
        received_at=1_764_460_800_000, adapter="openai_responses@1",
        envelope=ev.Envelope(content_type="application/json", body=b'{"type": "x"}'),
        payload=PAYLOADS[kind])
    if kind == PIECE_KIND:
        event.piece = ev.Piece(index=0, count=2)
    return event


def other_records() -> dict[str, object]:
    return {
        "provider_frame": ProviderFrame(
            frame_id="s0:0", run_key="run-1", provider="anthropic", api="anthropic-messages",
            transport="sse", received_at=1_764_460_800_000, content_type="application/json",
            body=b'{"type":"ping"}', stream_id="s0", sse_event="ping",
            headers={"request-id": "req_1"}, http_status=200,
            piece=FramePiece(index=1, count=3)),
        "run_state": RunState(
            run_id="run-1", tenant="acme", status="waiting_for_tool", provider="openai",
            api="openai-responses", model="gpt-5", provider_object_ids=["resp_1"],
            reason="tool_results", open_tool_calls=["call_1"], last_seq=7, event_count=8,
            usage=ev.Usage(input_tokens=10, output_tokens=5), started_at=1_764_460_800_000,
            updated_at=1_764_460_801_250, untrusted_sources=2, blocked_sources=1,
            policy_violations=1),
        "dead_letter": DeadLetter(stage="apply", reason="illegal transition", error_type="Illegal",
                                  at=1_764_460_800_000, run_key="run-1", topic="x.ingest",
                                  partition=0, offset=42, record=b"\xc3\x01..."),
    }
