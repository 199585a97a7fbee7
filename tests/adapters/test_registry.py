"""adapters/registry.py: choosing the API, and the driver over bodies and cassettes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import yaml

from modelevents.adapters.registry import (
    ADAPTERS,
    ALIASES,
    CLI_CHOICES,
    FAMILIES,
    api_for_uri,
    default_run_id,
    detect_api,
    normalize_bytes,
    normalize_file,
    provider_for_uri,
    resolve_api,
)
from modelevents.schemas.errors import DetectionError, FramingError
from tests.corpus import corpus_files, corpus_id, require_corpus
from tests.paths import FIXTURES

TOOL_LOOP = FIXTURES / "cassettes/anthropic-tool-loop.yaml"

ANTHROPIC_TEXT = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":null,'
    b'"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
    b'"stop_sequence":null},"usage":{"output_tokens":2}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def cassette(*interactions: tuple[str, str, str, bytes]) -> bytes:
    """A VCR cassette from (method, uri, content type, response body) tuples."""
    return yaml.safe_dump({"interactions": [
        {"request": {"method": method, "uri": uri, "body": ""},
         "response": {"status": {"code": 200, "message": "OK"},
                      "headers": {"Content-Type": [content_type]},
                      "body": {"string": body.decode()}}}
        for method, uri, content_type, body in interactions]}).encode()


# --- choosing the API --------------------------------------------------------------------------


def test_every_api_has_its_adapter_class():
    assert set(ADAPTERS) == {"openai-responses", "openai-chat", "anthropic-messages",
                             "gemini-interactions", "gemini-generate"}
    for api, cls in ADAPTERS.items():
        assert cls.api == api


def test_resolve_names_aliases_and_families():
    assert resolve_api("anthropic") == ("anthropic-messages",)
    assert resolve_api("openai-chat") == ("openai-chat",)
    assert resolve_api("openai") == ("openai-responses", "openai-chat")
    assert resolve_api("auto") == tuple(ADAPTERS)
    assert set(ALIASES.values()) | {a for f in FAMILIES.values() for a in f} <= set(ADAPTERS)
    assert len(set(CLI_CHOICES)) == len(CLI_CHOICES)


def test_unknown_provider_lists_the_choices():
    with pytest.raises(DetectionError, match="--provider .*anthropic-messages.*gemini-generate"):
        resolve_api("mistral")


@pytest.mark.parametrize("uri, api", [
    ("https://api.anthropic.com/v1/messages", "anthropic-messages"),
    ("https://api.anthropic.com/v1/messages?beta=true", "anthropic-messages"),
    ("https://api.openai.com/v1/chat/completions", "openai-chat"),
    ("https://api.groq.com/openai/v1/chat/completions", "openai-chat"),
    ("https://api.openai.com/v1/responses", "openai-responses"),
    ("https://api.openai.com/v1/responses/resp_123?stream=false", "openai-responses"),
    ("https://api.openai.com/v1/responses/resp_123/cancel", "openai-responses"),
    ("https://api.deepseek.com/responses", "openai-responses"),
    ("https://generativelanguage.googleapis.com/v1beta/models/"
     "gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini-generate"),
    ("https://europe-west4-aiplatform.googleapis.com/v1beta1/projects/p/locations/l/"
     "publishers/google/models/gemini-2.0-flash:generateContent", "gemini-generate"),
    ("https://generativelanguage.googleapis.com/v1beta/interactions", "gemini-interactions"),
    ("https://generativelanguage.googleapis.com/v1beta/interactions/v1_abc", "gemini-interactions"),
    ("https://api.openai.com/v1/files", None),
    ("https://api.openai.com/v1/vector_stores/vs_1/files", None),
    ("https://api.openai.com/v1/conversations", None),
    ("https://api.openai.com/v1/threads/thread_1/messages", None),
    ("https://oauth2.googleapis.com/token", None),
    ("https://api.anthropic.com/v1/messages/count_tokens", None),
    ("", None),
])
def test_api_for_uri(uri, api):
    assert api_for_uri(uri) == api


@pytest.mark.parametrize("uri, provider", [
    ("https://api.groq.com/openai/v1/chat/completions", "groq"),
    ("https://my-res.openai.azure.com/openai/deployments/d/chat/completions", "azure"),
    ("https://europe-west4-aiplatform.googleapis.com/v1/x:generateContent", "google"),
    ("https://openrouter.ai/api/v1/responses", "openrouter"),
    ("https://proxy.internal/v1/messages", None),
])
def test_provider_for_uri(uri, provider):
    assert provider_for_uri(uri) == provider


def test_detect_by_uri_wins_over_documents():
    docs = [{"type": "message_start", "message": {}}]
    assert detect_api(docs) == "anthropic-messages"
    assert detect_api([{}], uri="https://api.openai.com/v1/chat/completions") == "openai-chat"


def test_detect_nothing_recognized_names_the_choices():
    with pytest.raises(DetectionError, match="cannot tell.*--provider"):
        detect_api([{"hello": "world"}])
    with pytest.raises(DetectionError, match="no frame decoded as JSON"):
        detect_api([])


def test_error_envelopes_name_their_provider():
    openai_error = {"error": {"message": "quota", "type": "insufficient_quota", "param": None,
                              "code": "insufficient_quota"}}
    google_error = {"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
    assert detect_api([openai_error]) == "openai-responses"
    assert detect_api([openai_error], candidates=["openai-chat"]) == "openai-chat"
    assert detect_api([google_error]) == "gemini-generate"
    assert detect_api([google_error], candidates=FAMILIES["google"][::-1]) == "gemini-interactions"


# --- normalize_bytes: one body -----------------------------------------------------------------


def test_normalize_sse_body_detects_everything():
    result = normalize_bytes(ANTHROPIC_TEXT, source_name="hi.sse")
    assert (result.api, result.framing, result.frame_count) == ("anthropic-messages", "sse", 6)
    assert [e.seq for e in result.events] == list(range(len(result.events)))
    assert result.events[-1].kind == "run.finished"
    assert "".join(e.payload.text for e in result.events if e.kind == "text.delta") == "Hi"
    assert {e.run_id for e in result.events} == {result.run_id}
    assert result.run_id.startswith("hi-")


def test_normalize_is_deterministic():
    first, again = normalize_bytes(ANTHROPIC_TEXT), normalize_bytes(ANTHROPIC_TEXT)
    assert [e.event_id for e in first.events] == [e.event_id for e in again.events]
    assert first.run_id == again.run_id == default_run_id(ANTHROPIC_TEXT)
    assert default_run_id(ANTHROPIC_TEXT + b"\n") != first.run_id


def test_normalize_jsonl_and_explicit_api():
    lines = b"\n".join(line[len(b"data: "):] for line in ANTHROPIC_TEXT.split(b"\n")
                       if line.startswith(b"data: "))
    result = normalize_bytes(lines, api="anthropic", run_id="r1")
    assert (result.api, result.framing, result.run_id) == ("anthropic-messages", "jsonl", "r1")
    assert result.events[-1].kind == "run.finished"


def test_normalize_truncated_body_ends_in_stream_truncated():
    cut = ANTHROPIC_TEXT[:ANTHROPIC_TEXT.index(b"event: message_delta")]
    events = normalize_bytes(cut).events
    assert events[-1].kind == "error" and events[-1].payload.error_type == "stream_truncated"
    assert "run.finished" not in [e.kind for e in events]


def test_normalize_bare_http_error_body():
    body = b'{"error": {"message": "Incorrect API key", "type": "invalid_request_error", ' \
           b'"param": null, "code": "invalid_api_key"}}'
    result = normalize_bytes(body)
    assert (result.framing, result.events[0].source.transport) == ("json", "poll")
    assert "error" in [e.kind for e in result.events]


def test_normalize_rejects_unreadable_input():
    with pytest.raises(FramingError):
        normalize_bytes(b"<html>502</html>")
    with pytest.raises(DetectionError, match="--provider"):
        normalize_bytes(b'{"hello": "world"}')


# --- normalize_bytes: cassettes ----------------------------------------------------------------


def test_cassette_is_one_run_of_several_streams():
    result = normalize_file(TOOL_LOOP)
    assert (result.api, result.framing) == ("anthropic-messages", "cassette")
    assert [s.split(":")[0] for s in result.streams] == ["i2", "i3"]
    assert len(result.skipped) == 1 and "/v1/files" in result.skipped[0]
    events = result.events
    assert [e.seq for e in events] == list(range(len(events)))
    assert {e.run_id for e in events} == {result.run_id}
    assert {e.source.frame_id.split(":")[0] for e in events} == {"i2", "i3"}
    kinds = [e.kind for e in events]
    # The run goes on after the tool results. Each provider call opens with run.started (the
    # adapter contract in base.py) and the first ends awaiting, not finished.
    starts = [i for i, kind in enumerate(kinds) if kind == "run.started"]
    assert len(starts) == 2 and events[starts[1]].source.frame_id.startswith("i3:")
    assert starts[0] < kinds.index("run.awaiting") < starts[1]
    assert kinds.count("run.finished") == 1 and kinds[-1] == "run.finished"
    [call] = [e.payload for e in events if e.kind == "tool.call"]
    assert (call.tool_name, call.tool_call_id, orjson.loads(call.arguments)) == (
        "get_weather", "toolu_loop_1", {"city": "Oslo"})
    text = "".join(e.payload.text for e in events if e.kind == "text.delta")
    assert text == "It is 4 °C in Oslo."


def test_cassette_stream_cut_short_is_reported_where_it_happened():
    cut = ANTHROPIC_TEXT[:ANTHROPIC_TEXT.index(b"event: content_block_stop")]
    body = cassette(("POST", "https://api.anthropic.com/v1/messages", "text/event-stream", cut),
                    ("POST", "https://api.anthropic.com/v1/messages", "text/event-stream",
                     ANTHROPIC_TEXT))
    events = normalize_bytes(body).events
    truncations = [e for e in events if e.kind == "error"
                   and e.payload.error_type == "stream_truncated"]
    assert len(truncations) == 1 and truncations[0].source.frame_id.startswith("i1:")
    assert events[-1].kind == "run.finished" and events[-1].source.frame_id.startswith("i2:")


def test_cassette_background_polls_are_one_stream_of_snapshots():
    def snapshot(status: str, output: list) -> bytes:
        return orjson.dumps({
            "id": "resp_poll_1", "object": "response", "created_at": 1, "status": status,
            "model": "gpt-4o-2024-08-06", "output": output,
            "usage": ({"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}
                      if output else None)})
    message = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": "4", "annotations": []}]}
    poll = "https://api.openai.com/v1/responses/resp_poll_1"
    body = cassette(
        ("POST", "https://api.openai.com/v1/responses", "application/json", snapshot("queued", [])),
        ("GET", poll, "application/json", snapshot("in_progress", [])),
        ("GET", poll, "application/json", snapshot("completed", [message])),
        ("GET", poll, "application/json", snapshot("completed", [message])),  # a late re-read
    )
    result = normalize_bytes(body)
    kinds = [e.kind for e in result.events]
    assert {e.source.transport for e in result.events} == {"poll"}
    assert "error" not in kinds  # a queued snapshot is not a cut stream
    assert kinds.count("run.started") == 1 and kinds.count("run.finished") == 1
    assert kinds[-1] == "run.finished"


def test_cassette_with_no_model_call():
    body = cassette(("POST", "https://api.openai.com/v1/files", "application/json",
                     b'{"id": "file-1", "object": "file"}'))
    with pytest.raises(DetectionError, match="no model API call.*skipped: #1 POST"):
        normalize_bytes(body)


def test_cassette_named_api_family_filters_interactions():
    body = cassette(("POST", "https://api.anthropic.com/v1/messages", "text/event-stream",
                     ANTHROPIC_TEXT))
    with pytest.raises(DetectionError, match="not among openai-responses, openai-chat"):
        normalize_bytes(body, api="openai")


# --- the recorded corpus -----------------------------------------------------------------------

# Not provider output: the SDK's webhook signature test constants.
NOT_PROVIDER_OUTPUT = {"webhook-test-vector.json"}
CORPUS = [p for provider in ("anthropic", "gemini", "openai") for p in corpus_files(provider)
          if p.name not in NOT_PROVIDER_OUTPUT]


def expected_api(path: Path) -> str:
    """The API, read independently of the adapters: folder, uri or the first payload's shape."""
    rel = path.as_posix()
    if "/anthropic/" in rel:
        return "anthropic-messages"
    if "/gemini/" in rel:
        return "gemini-interactions" if "/interactions" in rel else "gemini-generate"
    if path.suffix == ".yaml":
        uri = yaml.safe_load(path.read_text())["interactions"][-1]["request"]["uri"]
        return "openai-chat" if "/chat/completions" in uri else "openai-responses"
    head = path.read_bytes()[:400]
    if b"chat.completion" in head or b'"choices"' in head:
        return "openai-chat"
    return "openai-responses"  # response.* events, and OpenAI error bodies (either API reads them)


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=corpus_id)
def test_every_corpus_file_is_detected_and_normalized(path):
    require_corpus()
    result = normalize_file(path)
    assert result.api == expected_api(path)
    events = result.events
    assert events and [e.seq for e in events] == list(range(len(events)))
    assert events[-1].kind in ("run.finished", "run.awaiting", "error")
    if result.framing == "cassette":
        assert result.streams
