"""The neutral request (schemas/transcript.py): strict validation with errors that say where,
JSON in and out, and neutral messages built from a finished run's events."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas.transcript import (
    NeutralRequest,
    Origin,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    messages_from_events,
)
from tests.paths import FIXTURES


def user(text: str) -> dict:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def call(call_id: str, name: str = "get_weather") -> dict:
    return {"type": "tool_call", "tool_name": name, "tool_call_id": call_id,
            "arguments": {"city": "Paris"}}


def result(call_id: str, name: str = "get_weather") -> dict:
    return {"role": "tool", "parts": [{"type": "tool_result", "tool_name": name,
                                       "tool_call_id": call_id, "output": "14 C"}]}


def body(transcript: list[dict], **extra) -> dict:
    out = {"transcript": transcript, "target": {"provider": "openai", "model": "gpt-5"}}
    out.update(extra)
    return out


def error_of(document: dict) -> str:
    with pytest.raises(ValidationError) as info:
        NeutralRequest.model_validate(document)
    return str(info.value)


def test_json_round_trip():
    document = body([user("hi"), {"role": "assistant", "parts": [call("c1")]}, result("c1")],
                    tools=[{"name": "get_weather", "parameters": {"type": "object"}}],
                    structured_output={"name": "w", "schema": {"type": "object"}},
                    required_capabilities=["tools"], background=True)
    request = NeutralRequest.model_validate(document)
    again = NeutralRequest.model_validate_json(request.model_dump_json(by_alias=True))
    assert again == request
    assert again.structured_output.json_schema == {"type": "object"}


def test_unknown_field_is_refused():
    document = body([user("hi")])
    document["transcript"][0]["parts"][0]["txt"] = "typo"
    assert "txt" in error_of(document) and "Extra inputs are not permitted" in error_of(document)


def test_tool_result_must_answer_an_earlier_call():
    message = error_of(body([user("hi"), result("c9")]))
    assert "transcript[1].parts[0]" in message and "'c9'" in message


def test_tool_result_must_name_the_called_tool():
    message = error_of(body([user("hi"), {"role": "assistant", "parts": [call("c1")]},
                             result("c1", name="get_time")]))
    assert "get_time" in message and "get_weather" in message


def test_duplicate_call_ids_and_double_answers():
    assert "used by an earlier call" in error_of(body([
        user("hi"), {"role": "assistant", "parts": [call("c1"), call("c1")]}]))
    assert "answered twice" in error_of(body([
        user("hi"), {"role": "assistant", "parts": [call("c1")]}, result("c1"), result("c1")]))


def test_unanswered_call_before_next_turn_is_refused_but_may_end_the_transcript():
    message = error_of(body([user("hi"), {"role": "assistant", "parts": [call("c1")]},
                             user("and?")]))
    assert "['c1'] have no tool_result" in message
    NeutralRequest.model_validate(body([user("hi"), {"role": "assistant", "parts": [call("c1")]}]))


def test_parts_fit_their_role():
    message = error_of(body([{"role": "user", "parts": [
        {"type": "tool_result", "tool_name": "t", "tool_call_id": "c", "output": ""}]}]))
    assert "role 'tool'" in message
    assert "cannot hold" in error_of(body([{"role": "system", "parts": [
        {"type": "image", "url": "https://example.org/a.png"}]}]))


def test_system_messages_only_open_the_transcript():
    request = NeutralRequest.model_validate(body(
        [{"role": "system", "parts": [{"type": "text", "text": "Be terse."}]}, user("hi")],
        instructions="You are helpful."))
    assert request.system_text() == "You are helpful.\n\nBe terse."
    assert [m.role for m in request.conversation()] == ["user"]
    assert "must come before" in error_of(body(
        [user("hi"), {"role": "system", "parts": [{"type": "text", "text": "late"}]}]))


def test_media_sources():
    assert "exactly one of url or data" in error_of(body([{"role": "user", "parts": [
        {"type": "image", "url": "https://example.org/a.png", "data": "AAAA",
         "media_type": "image/png"}]}]))
    assert "needs its media_type" in error_of(body([{"role": "user", "parts": [
        {"type": "image", "data": "AAAA"}]}]))
    assert "not valid base64" in error_of(body([{"role": "user", "parts": [
        {"type": "file", "data": "not base64!", "media_type": "application/pdf"}]}]))
    assert "exactly one of url, file_id or data" in error_of(body([{"role": "user", "parts": [
        {"type": "file", "file_id": "file-1", "url": "https://example.org/a.pdf"}]}]))


def test_opaque_reasoning_needs_its_origin():
    assert "needs its origin" in error_of(body([user("hi"), {"role": "assistant", "parts": [
        {"type": "reasoning", "signature": "sig"}]}]))


def test_target_or_preferences_exactly_one():
    document = body([user("hi")])
    document["preferences"] = [{"provider": "anthropic", "model": "claude-sonnet-4-5"}]
    assert "exactly one of target" in error_of(document)
    del document["target"], document["preferences"]
    assert "exactly one of target" in error_of(document)
    assert "unknown api" in error_of(body([user("hi")], target={
        "provider": "openai", "api": "openai-assistants", "model": "gpt-5"}))


def test_capability_names_come_from_the_vocabulary():
    message = error_of(body([user("hi")], required_capabilities=["vision"]))
    assert "unknown capabilities ['vision']" in message and "input.image" in message


def test_tool_declarations():
    assert '"type": "object"' in error_of(body([user("hi")], tools=[
        {"name": "t", "parameters": {"type": "string"}}]))
    assert "more than once" in error_of(body([user("hi")], tools=[{"name": "t"}, {"name": "t"}]))


def test_origin_accepts_only_its_own_provider_api_and_model():
    origin = Origin(provider="openai", api="openai-responses", model="gpt-5-2025-08-07")
    assert origin.accepts("openai", "openai-responses", "gpt-5")
    assert origin.accepts("openai", "openai-responses", "gpt-5-2025-08-07")
    assert not origin.accepts("openai", "openai-chat", "gpt-5")
    assert not origin.accepts("openai", "openai-responses", "gpt-5-mini")
    assert not origin.accepts("azure", "openai-responses", "gpt-5")
    assert not Origin(provider="google", api="gemini-interactions").accepts(
        "google", "gemini-interactions", "gemini-2.5-flash")


# --- messages from events ----------------------------------------------------------------------


def messages(fixture: str):
    return messages_from_events(normalize_bytes((FIXTURES / fixture).read_bytes()).events)


def test_openai_tool_loop_becomes_two_assistant_turns():
    first, second = messages("openai-responses/tool-loop-two-responses.sse")
    reasoning, tool_call = first.parts
    assert isinstance(reasoning, ReasoningPart) and reasoning.item_id == "rs_loop"
    assert reasoning.origin == Origin(provider="openai", api="openai-responses",
                                      model="gpt-5-mini-2025-08-07")
    assert reasoning.summary and reasoning.summary[0].startswith("**Checking the weather**")
    assert tool_call == ToolCallPart(tool_name="get_weather", tool_call_id="call_loop",
                                     arguments={"city": "Paris", "unit": "c"})
    assert isinstance(second.parts[0], TextPart) and "14 °C" in second.parts[0].text


def test_gemini_call_signature_stays_on_its_call():
    (message,) = messages("gemini-interactions/store-false-parallel-calls.sse")
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    assert len(calls) == 2
    assert calls[0].signature is not None and calls[0].signature.value == "c2lnLWNhbGwtMQ=="
    assert calls[0].signature.origin.api == "gemini-interactions"


def test_invalid_arguments_are_kept_as_text():
    (message,) = messages("openai-responses/tool-call-invalid-arguments.sse")
    bad = message.parts[0]
    assert bad.arguments == {} and bad.raw_arguments == '{"query": "unterminated'


def test_failed_and_cut_off_calls_are_not_history():
    assert messages("openai-responses/failed-insufficient-quota.sse") == []
    assert messages("openai-responses/truncated-mid-text.sse") == []


def test_refusal_is_kept_as_assistant_text():
    (message,) = messages("openai-responses/refusal.sse")
    assert message.parts == [TextPart(text="I'm sorry, I can't help with that.")]


def test_messages_from_events_continue_as_a_valid_request():
    history = messages("cassettes/anthropic-tool-loop.yaml")
    tool_call = history[0].parts[0]
    transcript = [user("Weather in Oslo?"), history[0].model_dump(),
                  result(tool_call.tool_call_id, tool_call.tool_name), history[1].model_dump(),
                  user("Thanks")]
    request = NeutralRequest.model_validate(body(transcript))
    assert request.transcript[-2].parts[0].text == "It is 4 °C in Oslo."


def test_results_numbered_before_their_call_ends_follow_its_assistant_message():
    """The executor runs a tool as soon as its ``tool.call`` is on ``events``: its result can be
    numbered before the provider call's own end (``run.awaiting``). The transcript must still
    put the call's assistant message first — a tool_result before its tool_call is a request
    no provider takes (found by tests/integration/tools/test_executor.py on a loaded machine)."""
    from modelevents.services.run_logic.executor_events import tool_result_event

    events = normalize_bytes(
        (FIXTURES / "openai-responses/tool-call-parallel.sse").read_bytes()).events
    calls = [e for e in events if e.kind == "tool.call"]
    assert len(calls) >= 2
    after = max(events.index(c) for c in calls) + 1
    assert "run.awaiting" in [e.kind for e in events[after:]]  # the call ends after its calls
    results = [tool_result_event(c, c.payload.tool_name, c.payload.tool_call_id, "14 C", False,
                                 b"{}", "application/json", 0) for c in calls]
    early = events[:after] + results + events[after:]
    assert messages_from_events(early) == messages_from_events(events + results)
    assistant, tool = messages_from_events(early)
    assert assistant.role == "assistant" and tool.role == "tool"
    assert [p.tool_call_id for p in tool.parts] == [c.payload.tool_call_id for c in calls]
    NeutralRequest.model_validate(body([user("Weather?"), assistant.model_dump(),
                                        tool.model_dump()]))
