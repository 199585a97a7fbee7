"""The provider simulator over real HTTP (uvicorn on loopback), driven by httpx and the SDKs.

The official SDKs (openai, anthropic, google-genai) pointed at the simulator prove that it
speaks the providers' real protocols: they parse every event it sends and retry its 429/5xx
as they would the provider's.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time

import anthropic
import httpx
import openai
import pytest
from google import genai

from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas.errors import InputError
from modelevents.services.simulator.app import Simulator, _body_chunks
from modelevents.services.simulator.recordings import STREAM_APIS, split_sse
from modelevents.services.simulator.scenarios import PROJECT_FIXTURES, Knobs, ScenarioRegistry
from modelevents.services.simulator.server import run_in_thread
from tests.corpus import require_corpus
from tests.paths import REPO_ROOT


@pytest.fixture(scope="module")
def sim():
    handle = run_in_thread(Simulator(ScenarioRegistry.default()).app)
    yield handle
    handle.stop()


@pytest.fixture
def http(sim):
    with httpx.Client(base_url=sim.base_url, timeout=60) as client:
        yield client


def _session(request) -> dict[str, str]:
    """Separate attempt counters per test (x-simulator-session)."""
    return {"x-simulator-session": request.node.name}


def _read_until_cut(response: httpx.Response) -> tuple[bytes, bool]:
    received = b""
    try:
        for chunk in response.iter_raw():
            received += chunk
    except httpx.RemoteProtocolError:
        return received, True
    return received, False


# --- the official SDKs parse what the simulator sends -----------------------------------------


def test_openai_sdk_parses_every_responses_event(sim):
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0)
    fixture = (PROJECT_FIXTURES / "openai-responses" / "tool-call-parallel.sse").read_bytes()
    events = list(client.responses.create(
        model="sim:openai-responses/tool-call-parallel", input="weather?", stream=True))
    frames = [f for f in split_sse(fixture, "openai-responses") if f.payload is not None]
    assert [e.type for e in events] == [f.payload["type"] for f in frames]
    assert [e.sequence_number for e in events] == [f.payload["sequence_number"] for f in frames]
    # Typed events, not the SDK's fallback for unknown payloads.
    assert all(type(e).__name__.startswith("Response") for e in events)
    assert events[-1].type == "response.completed"
    calls = [i for i in events[-1].response.output if i.type == "function_call"]
    assert len(calls) == 2


def test_openai_sdk_non_streaming_gets_the_terminal_response(sim):
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0)
    response = client.responses.create(model="gpt-4o", input="hi")
    assert response.status == "completed"
    assert response.output_text == "Hello, wörld 👋"


def test_openai_sdk_chat_completions_stream_and_object(sim):
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0)
    chunks = list(client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "capital?"}], stream=True,
        stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
        "The capital of France is Paris."
    assert chunks[-1].usage.total_tokens == 22
    completion = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "capital?"}])
    assert completion.choices[0].message.content == "The capital of France is Paris."
    assert completion.choices[0].finish_reason == "stop"


def test_anthropic_sdk_stream_and_message(sim):
    client = anthropic.Anthropic(base_url=sim.urls()["anthropic"], api_key="sk-ant-sim",
                                 max_retries=0)
    with client.messages.stream(model="claude-sonnet-4-5", max_tokens=64,
                                messages=[{"role": "user", "content": "capital?"}]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert kinds.count("text") == 3  # the SDK's own event per text delta
    assert final.content[0].text == "The capital of France is Paris."
    assert final.stop_reason == "end_turn"
    message = client.messages.create(model="claude-sonnet-4-5", max_tokens=64,
                                     messages=[{"role": "user", "content": "capital?"}])
    assert message.content[0].text == "The capital of France is Paris."
    assert message.usage.output_tokens == 9


def test_anthropic_sdk_raises_the_mid_stream_error_event(sim):
    """An `event: error` after HTTP 200 (reference/anthropic.md, error events) reaches the SDK."""
    client = anthropic.Anthropic(base_url=sim.urls()["anthropic"], api_key="sk-ant-sim",
                                 max_retries=0)
    seen = []
    with pytest.raises(anthropic.APIStatusError, match="Overloaded"):
        with client.messages.stream(
                model="sim:anthropic-messages/error-overloaded-midstream", max_tokens=64,
                messages=[{"role": "user", "content": "weather?"}]) as stream:
            for event in stream:
                seen.append(event.type)
    assert seen[0] == "message_start" and "content_block_start" in seen


def test_cassette_scenario_serves_its_nth_model_call(sim):
    client = anthropic.Anthropic(base_url=sim.urls()["anthropic"], api_key="sk-ant-sim",
                                 max_retries=0)
    ids = []
    for name in ("anthropic-messages/tool-loop", "anthropic-messages/tool-loop#1"):
        with client.messages.stream(model=f"sim:{name}", max_tokens=64,
                                    messages=[{"role": "user", "content": "notes?"}]) as stream:
            ids.append(stream.get_final_message().id)
    assert ids == ["msg_loop_1", "msg_loop_2"]


def test_google_genai_generate_content_stream_and_object(sim):
    client = genai.Client(api_key="g-sim", http_options={"base_url": sim.urls()["google-genai"]})
    chunks = list(client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"))
    assert "".join(c.text or "" for c in chunks) == "Hello, wörld!"
    assert chunks[-1].candidates[0].finish_reason.name == "STOP"
    response = client.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert response.text == "Hello, wörld!"


def test_google_genai_interactions_stream(sim):
    client = genai.Client(api_key="g-sim", http_options={"base_url": sim.urls()["google-genai"]})
    events = list(client.interactions.create(model="gemini-3-flash-preview", input="weather?",
                                             stream=True))
    fixture = (PROJECT_FIXTURES / "gemini-interactions" /
               "google-search-cited-event-ids.sse").read_bytes()
    frames = [f for f in split_sse(fixture, "gemini-interactions") if f.payload is not None]
    assert len(events) == len(frames)
    assert [e.event_type for e in events] == [f.payload["event_type"] for f in frames]
    assert events[-1].event_type == "interaction.completed"


# --- chunking: frames split at random offsets, nothing lost ----------------------------------


def test_chunker_splits_frames_at_random_offsets_and_loses_nothing():
    frames = [f"data: {{\"n\": {i}, \"pad\": \"{'x' * i}\"}}\n\n".encode() for i in range(40)]
    data = b"".join(frames)
    frame_ends = {sum(len(f) for f in frames[:i + 1]) for i in range(len(frames))}

    async def collect(seed):
        return [c async for c in _body_chunks(frames, Knobs(chunk_seed=seed), random.Random(seed))]

    import asyncio
    for seed in range(5):
        chunks = asyncio.run(collect(seed))
        assert b"".join(chunks) == data
        ends = set(itertools_accumulate(len(c) for c in chunks))
        assert ends - frame_ends, "every write ended on a frame boundary: nothing was split"
    assert asyncio.run(collect(7)) == asyncio.run(collect(7))  # the seed reproduces the cuts


def itertools_accumulate(lengths):
    total = 0
    for length in lengths:
        total += length
        yield total


_PROJECT_STREAMS = [(api, p) for api in STREAM_APIS
                    for p in sorted((PROJECT_FIXTURES / api).glob("*"))
                    if p.suffix in (".sse", ".jsonl", ".json-array")]
_ENDPOINTS = {
    "openai-responses": ("/v1/responses", {"model": "gpt-4o", "input": "hi", "stream": True}),
    "openai-chat": ("/v1/chat/completions", {"model": "gpt-4o", "stream": True,
                                             "messages": [{"role": "user", "content": "hi"}]}),
    "anthropic-messages": ("/v1/messages", {"model": "claude", "max_tokens": 9, "stream": True,
                                            "messages": [{"role": "user", "content": "hi"}]}),
    "gemini-generate": ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
                        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
    "gemini-interactions": ("/v1beta/interactions",
                            {"model": "gemini-2.5-flash", "input": "hi", "stream": True,
                             "store": False}),
}


def _stream(http, api, scenario, seed, headers=None):
    path, body = _ENDPOINTS[api]
    with http.stream("POST", path, json=body, headers={
            "x-simulator-scenario": scenario, "x-simulator-chunk-seed": str(seed),
            **(headers or {})}) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith(
            "application/json" if api == "gemini-generate" and "alt=sse" not in path
            else "text/event-stream")
        return _read_until_cut(response)


def _projections(body: bytes, api: str, framing: str = "auto") -> list[dict]:
    return [e.projection() for e in normalize_bytes(body, api=api, framing=framing,
                                                     run_id="r").events]


@pytest.mark.parametrize("api,path", _PROJECT_STREAMS,
                         ids=[f"{a}/{p.name}" for a, p in _PROJECT_STREAMS])
def test_received_bytes_normalize_like_the_fixture(http, api, path):
    """Every project stream, served chunked over HTTP, normalizes exactly as the file does."""
    received, cut = _stream(http, api, f"{api}/{path.stem}", seed=hash(path.name) % 1000)
    assert not cut
    recorded = path.read_bytes()
    if path.suffix == ".sse":
        assert received == recorded  # served verbatim
    # JSON lines and arrays go out as SSE: the same frames, so the same events.
    framing = {".jsonl": "jsonl", ".json-array": "json-array"}.get(path.suffix, "auto")
    assert _projections(received, api) == _projections(recorded, api, framing)


@pytest.mark.corpus
def test_corpus_streams_normalize_like_the_recordings(http):
    """Every recorded stream of ../shared/fixtures (SSE, chunk files, cassettes), served over
    HTTP in random chunks, normalizes into the events of the recording itself."""
    require_corpus()
    registry = ScenarioRegistry.default()
    checked, refused = 0, []
    for scenario in registry.scenarios.values():
        if not scenario.name.startswith("corpus/"):
            continue
        try:
            recording = registry.recording(scenario)
        except InputError as exc:  # e.g. a webhook test vector: no model API to serve it as
            refused.append(f"{scenario.name}: {exc}")
            continue
        if not recording.is_stream or recording.status >= 400:
            continue
        received, cut = _stream(http, recording.api, scenario.name, seed=checked)
        assert not cut
        assert received == recording.stream_bytes()
        expected = _projections(recording.stream_bytes(), recording.api)
        assert _projections(received, recording.api) == expected, scenario.name
        checked += 1
    assert checked >= 100, (checked, refused)
    assert len(refused) <= 2, refused


# --- cut and resume ----------------------------------------------------------------------------


def test_cut_then_resume_with_starting_after_gives_the_rest_exactly(http):
    fixture = (PROJECT_FIXTURES / "openai-responses" / "text-with-usage.sse").read_bytes()
    frames = split_sse(fixture, "openai-responses")
    with http.stream("POST", "/v1/responses", json={
            "model": "gpt-4o", "input": "hi", "stream": True, "background": True},
            headers={"x-simulator-scenario": "openai-responses/cut-after-5"}) as response:
        first, cut = _read_until_cut(response)
    assert cut, "the connection was not cut"
    complete = split_sse(first, "openai-responses")
    whole = [f for f in complete if f.raw.endswith(b"\n\n")]
    assert [f.raw for f in whole] == [f.raw for f in frames[:5]]
    last_seq = int(whole[-1].cursor)
    rest = http.get("/v1/responses/resp_text", params={"stream": "true",
                                                        "starting_after": last_seq})
    assert rest.status_code == 200
    assert b"".join(f.raw for f in whole) + rest.content == fixture
    # The events a client assembles from both connections are the uncut stream's.
    assert _projections(b"".join(f.raw for f in whole) + rest.content, "openai-responses") == \
        _projections(fixture, "openai-responses")


def test_openai_sdk_resumes_a_background_stream(sim):
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0)
    seen = []
    with pytest.raises(openai.APIConnectionError):
        for event in client.responses.create(
                model="sim:openai-responses/cut-after-5", input="hi", stream=True,
                background=True):
            seen.append(event)
    assert [e.sequence_number for e in seen] == [0, 1, 2, 3, 4]
    rest = list(client.responses.retrieve("resp_text", stream=True,
                                          starting_after=seen[-1].sequence_number))
    assert rest[0].sequence_number == 5
    assert rest[-1].type == "response.completed"
    assert rest[-1].response.output_text == "Hello, wörld 👋"


def test_non_background_stream_cannot_be_resumed_but_can_be_read_back(http):
    # openai.md §9-10: a stored response can be retrieved; only a background one streamed again.
    http.post("/_simulator/reset")  # other tests serve these recordings too
    http.post("/v1/responses", json={"model": "gpt-4o", "input": "hi", "stream": True},
              headers={"x-simulator-scenario": "openai-responses/refusal"})
    again = http.get("/v1/responses/resp_refusal", params={"stream": "true"})
    assert again.status_code == 400 and "background=true" in again.json()["error"]["message"]
    read_back = http.get("/v1/responses/resp_refusal")
    assert read_back.status_code == 200 and read_back.json()["id"] == "resp_refusal"
    http.post("/v1/responses", json={"model": "gpt-4o", "input": "hi", "stream": True,
                                     "store": False},
              headers={"x-simulator-scenario": "openai-responses/structured-output"})
    unstored = http.get("/v1/responses/resp_struct")
    assert unstored.status_code == 404


def test_interactions_cut_then_resume_with_last_event_id(http):
    fixture = (PROJECT_FIXTURES / "gemini-interactions" /
               "google-search-cited-event-ids.sse").read_bytes()
    with http.stream("POST", "/v1beta/interactions", json={
            "model": "gemini-3-flash-preview", "input": "weather?", "stream": True},
            headers={"x-simulator-cut-after-frame": "4"}) as response:
        first, cut = _read_until_cut(response)
    assert cut
    whole = [f for f in split_sse(first, "gemini-interactions") if f.raw.endswith(b"\n\n")]
    assert len(whole) == 4 and whole[-1].cursor == "e4"
    rest = http.get("/v1beta/interactions/v1_search",
                    params={"stream": "true", "last_event_id": whole[-1].cursor})
    assert rest.status_code == 200
    assert b"".join(f.raw for f in whole) + rest.content == fixture
    unknown = http.get("/v1beta/interactions/v1_search",
                       params={"stream": "true", "last_event_id": "nope"})
    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]["message"]


# --- rate limits and server errors -------------------------------------------------------------


def test_429_then_success_with_retry_headers(http, request):
    body = {"model": "gpt-4o", "input": "hi", "stream": True}
    headers = {**_session(request), "x-simulator-fail": "429:1",
               "x-simulator-retry-after-ms": "1500"}
    refused = http.post("/v1/responses", json=body, headers=headers)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "2"
    assert refused.headers["retry-after-ms"] == "1500"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert refused.headers["x-request-id"].startswith("req_")
    assert refused.json()["error"]["code"] == "rate_limit_exceeded"
    served = http.post("/v1/responses", json=body, headers=headers)
    assert served.status_code == 200
    assert served.headers["content-type"] == "text/event-stream; charset=utf-8"


def test_sdk_retries_a_429_and_succeeds(sim):
    sim.simulator.reset()
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=2)
    response = client.responses.create(model="sim:openai-responses/rate-limited-once", input="hi")
    assert response.output_text == "Hello, wörld 👋"
    attempts = sim.simulator.requests("openai-responses")
    assert [(r["status"], r["attempt"]) for r in attempts] == [(429, 1), (200, 2)]


def test_sdk_without_retries_sees_the_rate_limit(sim, request):
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0,
                           default_headers={**_session(request), "x-simulator-fail": "429:1"})
    with pytest.raises(openai.RateLimitError) as caught:
        client.responses.create(model="gpt-4o", input="hi")
    assert caught.value.response.headers["retry-after-ms"] == "20"


def test_anthropic_overloaded_then_success(sim, request):
    client = anthropic.Anthropic(base_url=sim.urls()["anthropic"], api_key="sk-ant-sim",
                                 max_retries=2, default_headers=_session(request))
    message = client.messages.create(model="sim:anthropic-messages/overloaded-once",
                                     max_tokens=9, messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "The capital of France is Paris."
    mine = [r for r in sim.simulator.requests("anthropic-messages")
            if r["headers"].get("x-simulator-session") == request.node.name]
    assert [r["status"] for r in mine] == [529, 200]


def test_5xx_for_the_first_k_attempts(http, request):
    path, body = _ENDPOINTS["gemini-generate"]
    headers = {**_session(request), "x-simulator-fail": "503:2"}
    first = http.post(path, json=body, headers=headers)
    second = http.post(path, json=body, headers=headers)
    third = http.post(path, json=body, headers=headers)
    assert [first.status_code, second.status_code, third.status_code] == [503, 503, 200]
    assert first.json()["error"]["status"] == "UNAVAILABLE"
    assert first.headers["retry-after"] == "1"


def test_recorded_error_body_is_served_with_its_status(http):
    path, body = _ENDPOINTS["anthropic-messages"]
    answer = http.post(path, json=body,
                       headers={"x-simulator-scenario": "anthropic-messages/error-body-rate-limit"})
    assert answer.status_code == 429
    assert answer.json()["error"]["type"] == "rate_limit_error"
    assert "retry-after" in answer.headers


# --- bad requests ------------------------------------------------------------------------------


def test_invalid_request_is_a_400_listing_the_problems(sim, http):
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="gpt-4o", input=[{"role": "user", "content": [
            {"type": "input_text", "txt": "hi"}]}])
    error = caught.value.body
    assert error["type"] == "invalid_request_error"
    assert "input.0.content.0.txt: unknown field" in error["message"]
    assert error["param"] == "input.0.content.0.text"
    logged = sim.simulator.requests("openai-responses")[-1]
    assert logged["status"] == 400 and logged["problems"]

    claude = anthropic.Anthropic(base_url=sim.urls()["anthropic"], api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model="claude", max_tokens=9, messages=[
            {"role": "user", "content": [{"type": "txt", "text": "hi"}]}])
    assert "messages.0.content.0.type" in str(caught.value)

    google = http.post("/v1beta/models/gemini-2.5-flash:generateContent",
                       json={"contents": [{"role": "user", "parts": [{"txt": "hi"}]}]})
    assert google.status_code == 400
    error = google.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["details"][0]["fieldViolations"][0]["field"] == "contents.0.parts.0.txt"

    broken = http.post("/v1/messages", content=b"{not json", headers={
        "content-type": "application/json"})
    assert broken.status_code == 400 and broken.json()["type"] == "error"


def test_unknown_scenario_is_a_clear_404(http):
    answer = http.post("/v1/responses", json={"model": "sim:openai-responses/no-such-thing",
                                              "input": "hi"})
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert "no-such-thing" in message and "/_simulator/scenarios" in message


def test_scenario_of_another_api_is_refused(http):
    answer = http.post("/v1/responses", json={"model": "gpt-4o", "input": "hi"},
                       headers={"x-simulator-scenario": "anthropic-messages/text"})
    assert answer.status_code == 400
    assert "recording of anthropic-messages" in answer.json()["error"]["message"]


def test_bad_knob_header_is_a_400(http):
    answer = http.post("/v1/responses", json={"model": "gpt-4o", "input": "hi"},
                       headers={"x-simulator-cut-after-frame": "five"})
    assert answer.status_code == 400 and "cut-after-frame" in answer.json()["error"]["message"]


def test_unknown_endpoint_is_a_clear_404(http):
    answer = http.post("/v1/completions", json={})
    assert answer.status_code == 404 and "/v1/responses" in answer.json()["error"]["message"]


# --- background runs, polling, cancel ----------------------------------------------------------


def test_background_response_is_polled_to_completion(sim):
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0)
    created = client.responses.create(model="sim:openai-responses/structured-output",
                                      input="hi", background=True)
    assert created.status == "queued" and created.background
    statuses = [client.responses.retrieve(created.id).status for _ in range(2)]
    assert statuses == ["in_progress", "completed"]


def test_a_call_replaying_a_live_background_runs_recording_leaves_its_polls_alone(sim, http):
    # The demo starts a background run and a streamed call of one recording (one object id).
    http.post("/_simulator/reset")
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0)
    created = client.responses.create(model="sim:openai-responses/structured-output",
                                      input="hi", background=True)
    assert client.responses.retrieve(created.id).status == "in_progress"
    streamed = list(client.responses.create(model="sim:openai-responses/structured-output",
                                            input="hi", stream=True))
    assert streamed[-1].response.id == created.id  # the recording's own id, again
    assert client.responses.retrieve(created.id).status == "completed"


def test_background_response_can_be_cancelled_and_others_cannot(sim, http):
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-sim", max_retries=0)
    created = client.responses.create(model="sim:openai-responses/refusal", input="hi",
                                      background=True, extra_headers={
                                          "x-simulator-poll-steps": "5"})
    assert client.responses.cancel(created.id).status == "cancelled"
    assert client.responses.retrieve(created.id).status == "cancelled"
    assert http.post("/v1/responses/resp_nope/cancel").status_code == 404


def test_interactions_background_poll_and_cancel(http):
    created = http.post("/v1beta/interactions", json={
        "model": "gemini-3-flash-preview", "input": "weather?", "background": True})
    assert created.status_code == 200 and created.json()["status"] == "in_progress"
    assert http.get("/v1beta/interactions/v1_search").json()["status"] == "in_progress"
    assert http.get("/v1beta/interactions/v1_search").json()["status"] == "completed"
    # Finished: the provider's terminal state stands, a cancel is refused.
    late = http.post("/v1beta/interactions/v1_search/cancel")
    assert late.status_code == 400 and "already completed" in late.text
    http.post("/v1beta/interactions", json={"model": "gemini-3-flash-preview", "input": "w?",
                                            "background": True})
    assert http.post("/v1beta/interactions/v1_search:cancel").json()["status"] == "cancelled"
    assert http.get("/v1beta/interactions/v1_search").json()["status"] == "cancelled"
    assert http.post("/v1beta/interactions/v1_search:delete").status_code == 404


def test_a_slow_cancel_and_a_slow_poll(http):
    # cancel_polls: the cancel and the next N polls still say in_progress; poll_delay_ms: each
    # poll's answer waits.
    knobs = {"x-simulator-cancel-polls": "2", "x-simulator-poll-steps": "50",
             "x-simulator-poll-delay-ms": "200"}
    http.post("/v1/responses", json={"model": "gpt-4o", "input": "hi", "background": True},
              headers={**knobs, "x-simulator-scenario": "openai-responses/structured-output"})
    assert http.post("/v1/responses/resp_struct/cancel").json()["status"] == "in_progress"
    started = time.monotonic()
    statuses = [http.get("/v1/responses/resp_struct").json()["status"] for _ in range(3)]
    assert statuses == ["in_progress", "in_progress", "cancelled"]
    assert time.monotonic() - started >= 0.6


# --- pacing, request log -----------------------------------------------------------------------


def test_delay_per_frame(http):
    frames = len(split_sse((PROJECT_FIXTURES / "simulator" / "anthropic-text.sse").read_bytes(),
                           "anthropic-messages"))
    path, body = _ENDPOINTS["anthropic-messages"]
    start = time.monotonic()
    received, _ = _stream(http, "anthropic-messages", "anthropic-messages/text", seed=1,
                          headers={"x-simulator-delay-ms": "40"})
    elapsed = time.monotonic() - start
    assert received.count(b"\n\n") == frames
    assert elapsed >= frames * 0.040 * 0.9


def test_paced_stamped_stream_sends_each_frame_on_its_cadence_with_its_write_time(tmp_path):
    # What bench/proxy.py measures per-chunk latency with: frame i is written at the start +
    # i × interval, carrying the CLOCK_MONOTONIC ns of its write in place of STAMP_MARKER.
    chunk = ('data: {"id":"chatcmpl-p","object":"chat.completion.chunk","created":1,'
             '"model":"m","choices":[{"index":0,"delta":{"content":"ts:@sent_ns@ "},'
             '"finish_reason":null}]}\n\n')
    (tmp_path / "stamped.sse").write_text(chunk * 8 + "data: [DONE]\n\n")
    registry = ScenarioRegistry.default(with_corpus=False)
    registry.add_folder(tmp_path, "paced")
    handle = run_in_thread(Simulator(registry, validate=False).app)
    path, body = _ENDPOINTS["openai-chat"]
    arrivals: list[tuple[int, bytes]] = []
    try:
        with httpx.Client(base_url=handle.base_url, timeout=60) as client, client.stream(
                "POST", path, json=body, headers={"x-simulator-scenario": "paced/stamped",
                                                  "x-simulator-interval-ms": "30",
                                                  "x-simulator-stamp": "1"}) as response:
            assert response.status_code == 200
            for data in response.iter_raw():
                arrivals.append((time.monotonic_ns(), data))
    finally:
        handle.stop()
    received = b"".join(data for _, data in arrivals)
    assert b"@sent_ns@" not in received and received.count(b"\n\n") == 9
    stamps = []
    for arrived, data in arrivals:
        for sent in re.findall(rb"ts:(\d+) ", data):
            assert int(sent) <= arrived  # written before it was read
            stamps.append(int(sent))
    assert len(stamps) == 8
    # Never early: frame i goes out no sooner than i × 30 ms after the first.
    assert all(stamps[i] - stamps[0] >= i * 30e6 - 1e6 for i in range(8))


def test_request_log_keeps_bodies_and_drops_secrets(sim, http):
    sim.simulator.reset()
    client = openai.OpenAI(base_url=sim.urls()["openai"], api_key="sk-secret-value",
                           max_retries=0)
    client.responses.create(model="gpt-4o", input="remember me")
    logged = http.get("/_simulator/requests").json()
    assert logged[-1]["body"] == {"model": "gpt-4o", "input": "remember me"}
    assert logged[-1]["scenario"] == "openai-responses/text-with-usage"
    assert "authorization" not in logged[-1]["headers"]
    assert "sk-secret-value" not in repr(logged)
    assert sim.simulator.requests()[-1]["body"] == logged[-1]["body"]
    listing = http.get("/_simulator/scenarios").json()
    assert listing["defaults"]["openai-chat"] == "openai-chat/text"
    assert any(s["name"] == "openai-responses/rate-limited-once" and s["knobs"]["fail_status"]
               == 429 for s in listing["scenarios"])


# --- the command line --------------------------------------------------------------------------


def test_simulator_command_prints_base_urls_and_serves(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = ("import argparse, sys\n"
            "from modelevents.services.cli.commands import simulator\n"
            "p = argparse.ArgumentParser(); sub = p.add_subparsers()\n"
            "simulator.register(sub)\n"
            "a = p.parse_args(sys.argv[1:])\n"
            "sys.exit(a.run(a))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, "simulator", "--port", str(port),
                             "--no-corpus"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO_ROOT)
    try:
        lines = [proc.stdout.readline() for _ in range(4)]
        assert f"http://127.0.0.1:{port}" in lines[0]
        assert f"base_url=http://127.0.0.1:{port}/v1" in lines[1]
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=60,
                                    json={"model": "gpt-4o", "messages": [
                                        {"role": "user", "content": "hi"}]})
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, proc.stderr.read()
                time.sleep(0.1)
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == \
            "The capital of France is Paris."
    finally:
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(10)


def test_unknown_fixtures_folder_is_a_clear_error(tmp_path):
    from modelevents.schemas.errors import ConfigError
    with pytest.raises(ConfigError, match="does not exist"):
        ScenarioRegistry.default([tmp_path / "missing"], with_corpus=False)


def test_extra_fixtures_folder_becomes_scenarios(tmp_path, http):
    (tmp_path / "mine").mkdir()
    source = PROJECT_FIXTURES / "openai-chat" / "refusal.sse"
    (tmp_path / "mine" / "refusal.sse").write_bytes(source.read_bytes())
    registry = ScenarioRegistry.default([tmp_path / "mine"], with_corpus=False)
    scenario = registry.resolve("mine/refusal", "openai-chat")
    assert registry.recording(scenario).api == "openai-chat"  # detected


# --- request rules (scenarios.yaml by_request) ----------------------------------------------


def test_a_request_naming_no_scenario_is_answered_by_the_rule_it_matches(sim, http):
    sim.simulator.reset()
    asked = {"model": "gpt-4.1-nano", "stream": True, "max_output_tokens": 16,
             "input": [{"role": "user", "content": [
                 {"type": "input_text", "text": "colour?"},
                 {"type": "input_image", "image_url": "https://example.com/a.png",
                  "detail": "auto"}]}]}
    refused = http.post("/v1/responses", json=asked)
    assert refused.status_code == 400
    assert "image_url is only supported by certain models" in refused.json()["error"]["message"]
    # The same request to a model no rule names gets the endpoint's default.
    answered = http.post("/v1/responses", json={**asked, "model": "gpt-5"})
    assert answered.status_code == 200
    assert [r["scenario"] for r in sim.simulator.requests("openai-responses")] == [
        "openai-responses/image-unsupported", "openai-responses/text-with-usage"]


def test_a_rule_naming_no_scenario_is_refused_with_its_place(tmp_path):
    from modelevents.schemas.errors import ConfigError
    path = tmp_path / "scenarios.yaml"
    path.write_text("by_request:\n  - {api: openai-chat, scenario: openai-chat/nothing}\n")
    with pytest.raises(ConfigError, match=r"by_request\[0\]: 'openai-chat/nothing' is no scenario"):
        ScenarioRegistry().add_scenario_file(path, PROJECT_FIXTURES)
