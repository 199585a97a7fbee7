"""Issue #4: "a provider switch mid-session whose rendered requests validate against each
provider's schema".

A session starts on one provider: its assistant turns are built from a recorded stream's
ModelEvents (``normalize_bytes`` → ``messages_from_events``), every tool call gets a result, and
the user asks for more. That same neutral history is rendered for every provider API; each body
must fit the official SDK's request type (``services/provider_schemas.validate_request``), and
the opaque reasoning blobs (signatures, encrypted content) must appear exactly where they came
from — same provider, API and model — and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.adapters.requests import RENDERERS, build
from modelevents.schemas.transcript import (
    Message,
    NeutralRequest,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    messages_from_events,
)
from tests.corpus import CORPUS_DIR, require_corpus
from tests.paths import FIXTURES

# Sessions that start from the project's own fixtures (always run).
LOCAL = ["gemini-interactions/store-false-parallel-calls.sse",
         "openai-responses/tool-loop-two-responses.sse",
         "gemini-generate/thought-summary-then-text.sse",
         "cassettes/anthropic-tool-loop.yaml"]
# Sessions from the recorded corpus: real streams with signed reasoning and tool calls. The
# Anthropic one with thinking + tool_use is Vercel's hand-written stream (no real recording of
# thinking with a client tool call exists in the corpus, see reference/anthropic.md §2).
CORPUS = ["anthropic/pydantic-ai/test_anthropic_model_thinking_part_stream.yaml",
          "anthropic/vercel-ai/spliced-message-start.chunks.txt",
          "openai/pydantic-ai/test_openai_responses_streaming_usage.yaml",
          "gemini/pydantic-ai/test_google_streaming_tool_call_thought_signature.yaml",
          "gemini/vercel-ai/interactions/tool-call-step1.chunks.txt"]

# A model of each API to switch to.
OTHER_MODEL = {"openai-responses": "gpt-5", "openai-chat": "gpt-4.1",
               "anthropic-messages": "claude-sonnet-4-5", "gemini-generate": "gemini-3-pro-preview",
               "gemini-interactions": "gemini-2.5-flash"}
# Models of the same API for "same provider, another model" (two each: one may be the origin).
ANOTHER_MODEL = {"openai-responses": ("gpt-4.1", "o3"), "openai-chat": ("gpt-4o", "gpt-4.1"),
                 "anthropic-messages": ("claude-opus-4-1", "claude-haiku-4-5"),
                 "gemini-generate": ("gemini-2.5-pro", "gemini-3-flash-preview"),
                 "gemini-interactions": ("gemini-2.5-pro", "gemini-3-flash-preview")}


def session(path: Path) -> tuple[NeutralRequest, list[Message], tuple[str, str, str]]:
    events = normalize_bytes(path.read_bytes()).events
    first = events[0]
    history = messages_from_events(events)
    assert history, f"{path.name} yields no assistant turn"
    transcript: list[dict] = [{"role": "user", "parts": [{"type": "text", "text": "Start."}]}]
    for message in history:
        transcript.append(message.model_dump())
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        if calls:
            transcript.append({"role": "tool", "parts": [
                {"type": "tool_result", "tool_name": c.tool_name, "tool_call_id": c.tool_call_id,
                 "output": '{"ok": true}'} for c in calls]})
    transcript.append({"role": "user", "parts": [{"type": "text", "text": "Continue."}]})
    tools = sorted({p.tool_name for m in history for p in m.parts if isinstance(p, ToolCallPart)})
    request = NeutralRequest.model_validate({
        "transcript": transcript,
        "tools": [{"name": name, "parameters": {"type": "object"}} for name in tools],
        "target": {"provider": first.provider, "api": first.api, "model": first.model},
    })
    return request, history, (first.provider, first.api, first.model)


def blobs(history: list[Message], api: str) -> set[str]:
    """The opaque values a same-origin request of ``api`` must carry back."""
    out: set[str] = set()
    for message in history:
        for part in message.parts:
            if isinstance(part, ReasoningPart):
                if api == "openai-responses" and not part.item_id:
                    continue  # a reasoning item needs its rs_ id
                out.update(v for v in (part.signature, part.encrypted_content) if v)
            elif isinstance(part, ToolCallPart) and part.signature:
                # FunctionCallStepParam has no signature field (gemini_interactions docstring).
                if api != "gemini-interactions":
                    out.add(part.signature.value)
    return out


def all_blobs(history: list[Message]) -> set[str]:
    return blobs(history, "openai-responses") | blobs(history, "gemini-generate") | {
        p.signature for m in history for p in m.parts
        if isinstance(p, ReasoningPart) and p.signature}


def check_switch(path: Path, api: str) -> None:
    from modelevents.services.simulator.provider_schemas import validate_request

    request, history, (provider, origin_api, origin_model) = session(path)
    same = api == origin_api
    model = origin_model if same else OTHER_MODEL[api]
    body = build(request, api, model, stream=True).body
    assert validate_request(api, body) == [], (path.name, api)
    text = repr(body)
    expected = blobs(history, api) if same else set()
    for blob in all_blobs(history):
        if blob in expected:
            assert blob in text, f"{api}: own signature missing ({path.name})"
        else:
            assert blob not in text, f"{api}: foreign signature sent ({path.name})"
    # The visible conversation carries over everywhere.
    for message in history:
        for part in message.parts:
            if isinstance(part, TextPart):
                assert repr(part.text)[1:-1] in text or part.text in text
            elif isinstance(part, ToolCallPart):
                assert part.tool_call_id in text and part.tool_name in text
    if same:
        # Same provider and API but another model: nothing opaque goes back.
        other_model = next(m for m in ANOTHER_MODEL[api]
                           if not origin_model.startswith(m) and not m.startswith(origin_model))
        other = build(request, api, other_model, stream=False).body
        assert not any(blob in repr(other) for blob in all_blobs(history))


@pytest.mark.parametrize("api", list(RENDERERS))
@pytest.mark.parametrize("fixture", LOCAL)
def test_switch_from_local_session(fixture, api):
    check_switch(FIXTURES / fixture, api)


@pytest.mark.corpus
@pytest.mark.parametrize("api", list(RENDERERS))
@pytest.mark.parametrize("fixture", CORPUS)
def test_switch_from_recorded_session(fixture, api):
    require_corpus()
    check_switch(CORPUS_DIR / fixture, api)


def test_the_sessions_do_carry_signatures():
    # Guard: the switch test proves little if its sessions had no opaque reasoning at all.
    request, history, _ = session(FIXTURES / LOCAL[0])
    assert all_blobs(history)
    require_corpus()
    for fixture in CORPUS:
        _, history, _ = session(CORPUS_DIR / fixture)
        assert all_blobs(history), fixture
