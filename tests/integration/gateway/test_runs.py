"""Runs started by the gateway (``POST /v1/runs``) over real HTTP: the gateway (uvicorn on a
loopback port) calls the provider simulator (uvicorn too, serving the project's recordings as
real SSE split at random byte offsets, validating every request against the provider's request
schema), publishes every frame to the real broker, and the real stream processor
(``modelevents worker``, a subprocess) turns them into ``events`` and ``runs``, which the
gateway serves back (``/v1/runs/{id}``, ``/events`` as SSE, ``/messages``).

The providers are the only part faked, by the simulator. The module shares one set of topics and
one worker (every test makes runs of its own); every test gets a fresh gateway and a reset
simulator (its request log, attempt counters and stored objects).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

import httpx
import orjson
import pytest

from modelevents.adapters.requests import build
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.gateway.config import ProviderConfig
from modelevents.services.kafka import clients
from modelevents.services.local.asgi_thread import ServedApp, serve_in_thread
from modelevents.services.run_logic.run_machine import run_state_of
from modelevents.services.simulator.provider_schemas import validate_request
from tests.integration.pipeline import processed_to_end, run
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures used by name)
    ANTHROPIC_KEY,
    GEMINI_KEY,
    ONE_PER_API,
    OPENAI_KEY,
    SETTLE_S,
    assert_events_as_normalized,
    call_over,
    deliver_completed,
    frames_on_topic,
    gateway,
    get_run,
    neutral,
    offline,
    requests_to,
    settings,
    settled,
    sim,
    simulator,
    sse_events,
    start_gateway,
    start_run,
    wait_run,
)

pytestmark = pytest.mark.kafka


# --- a run per provider API -------------------------------------------------------------------


@pytest.mark.parametrize(("provider", "api", "scenario", "recording"), ONE_PER_API,
                         ids=[row[1] for row in ONE_PER_API])
def test_a_run_through_the_gateway_gives_what_normalize_gives(gateway, sim, settings, provider,
                                                              api, scenario, recording):
    started = start_run(gateway, neutral(provider, api, f"sim:{scenario}"))
    assert (started["provider"], started["api"]) == (provider, api)
    expected = run_state_of(offline(recording))
    body = wait_run(gateway, started["run_id"], settled(expected.status, expected.last_seq),
                    f"{expected.status} with {expected.last_seq + 1} events")
    state = body["state"]
    assert (state["status"], state["reason"], state["needs_reconciliation"]) == (
        expected.status, expected.reason, expected.needs_reconciliation)
    assert_events_as_normalized(gateway, started["run_id"], recording)
    # The wire request the gateway rendered fitted the provider's request schema (the simulator
    # answers 400 otherwise) and carried the key the way that provider takes it.
    [received] = requests_to(sim, api)
    assert received["status"] == 200 and not received.get("problems")
    assert validate_request(api, received["body"]) == []
    call = body["calls"][0]
    assert call["error"] is None and call["frames"] > 0
    # Credentials reach the provider only, never a frame.
    assert not any(key.encode() in raw for raw in frames_on_topic(settings)
                   for key in (OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY))


def test_router_picks_the_first_compatible_api_of_a_provider(gateway, sim):
    started = start_run(gateway, neutral("openai", None, "sim:openai-responses/text-with-usage",
                                         preferred_capabilities=["background"]))
    assert started["api"] == "openai-responses"
    assert started["preferred_met"] == ["background"]
    wait_run(gateway, started["run_id"], settled("completed"), "completed")


# --- refusals before anything is sent -----------------------------------------------------------


def test_capability_rejection_is_422_and_sends_nothing(gateway, sim):
    body = neutral("anthropic", "anthropic-messages", "claude-sonnet-4-5", background=True)
    answer = start_run(gateway, body, expect=422)
    assert answer["code"] == "capability_rejected" and "background" in answer["error"]
    [candidate] = answer["candidates"]
    assert candidate["missing"] == [{"capability": "background",
                                     "because": "background is true"}]
    image = {"role": "user", "parts": [{"type": "image", "url": "https://example.org/a.png"}]}
    answer = start_run(gateway, {**neutral("openai", "openai-chat", "gpt-4o-mini-audio-preview"),
                                 "transcript": [image]}, expect=422)
    assert answer["candidates"][0]["missing"][0]["capability"] == "input.image"
    unknown = start_run(gateway, neutral("openai", "openai-responses", "no-such-model"), expect=422)
    assert "not in the capability manifest" in unknown["candidates"][0]["reason"]
    assert sim.simulator.requests() == []


def test_invalid_requests_are_422_with_the_field_and_unknown_runs_404(gateway, sim):
    response = httpx.post(f"{gateway.url}/v1/runs", json={"transcript": []}, timeout=10)
    assert response.status_code == 422
    assert any(error["loc"][-1] == "transcript" for error in response.json()["errors"])
    call = {"role": "assistant", "parts": [{"type": "tool_call", "tool_name": "f",
                                            "tool_call_id": "c1"}]}
    ask = {"role": "user", "parts": [{"type": "text", "text": "and?"}]}
    response = httpx.post(f"{gateway.url}/v1/runs", timeout=10, json={
        **neutral("openai", "openai-responses", "gpt-4.1"), "transcript": [call, ask]})
    assert response.status_code == 422 and "no tool_result" in response.text
    assert httpx.get(f"{gateway.url}/v1/runs/run_nope", timeout=10).status_code == 404
    assert httpx.get(f"{gateway.url}/v1/runs/run_nope/messages", timeout=30).status_code == 404
    assert httpx.post(f"{gateway.url}/v1/runs/run_nope/cancel", timeout=10).status_code == 404
    assert sim.simulator.requests() == []


def test_a_provider_without_key_or_own_base_url_takes_no_runs(start_gateway, sim):
    # OpenAI at its own URL without a key is not configured for runs; Anthropic (simulator).
    gateway = start_gateway(providers={
        "openai": ProviderConfig(base_url="https://api.openai.com"),
        "anthropic": ProviderConfig(base_url=sim.base_url, api_key=ANTHROPIC_KEY)})
    answer = start_run(gateway, neutral("openai", "openai-responses",
                                        "sim:openai-responses/text-with-usage"), expect=422)
    assert answer["code"] == "capability_rejected"
    assert "not configured on this gateway" in answer["candidates"][0]["reason"]
    assert sim.simulator.requests() == []
    # A preference list falls through to the next provider that is.
    body = neutral("openai", "openai-responses", "x")
    del body["target"]
    body["preferences"] = [{"provider": "openai", "model": "sim:openai-responses/text-with-usage"},
                           {"provider": "anthropic", "model": "sim:anthropic-messages/text"}]
    started = start_run(gateway, body)
    assert (started["provider"], started["api"]) == ("anthropic", "anthropic-messages")
    wait_run(gateway, started["run_id"], settled("completed"), "completed")


# --- cuts, retries, errors ------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["cut-after-4", "cut-after-4-overlap-2"])
def test_a_cut_interactions_stream_is_resumed_without_duplicates(gateway, sim, scenario):
    # overlap-2: the resumed stream sends two frames before the cursor again.
    recording = "gemini-interactions/google-search-cited-event-ids.sse"
    started = start_run(gateway, neutral("google", "gemini-interactions",
                                         f"sim:gemini-interactions/{scenario}"))
    expected = run_state_of(offline(recording))
    body = wait_run(gateway, started["run_id"], settled("completed", expected.last_seq),
                    "completed")
    call = body["calls"][0]
    assert (call["streams"], call["resumed"]) == (2, 1), call
    assert "cut after" in call["notes"][0]
    resume = [r for r in requests_to(sim, "gemini-interactions") if r["method"] == "GET"]
    assert len(resume) == 1 and resume[0]["query"]["last_event_id"]
    assert body["state"]["needs_reconciliation"] is False
    # Each event once, seq contiguous, and exactly the uncut recording's events.
    assert_events_as_normalized(gateway, started["run_id"], recording)


@pytest.mark.parametrize("scenario", ["cut-after-5", "cut-after-5-overlap-3"])
def test_a_cut_background_openai_stream_resumes_with_starting_after(gateway, sim, scenario):
    recording = "openai-responses/text-with-usage.sse"
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         f"sim:openai-responses/{scenario}",
                                         background=True, stream=True))
    assert started["stream"] is True and started["background"] is True
    expected = run_state_of(offline(recording))
    body = wait_run(gateway, started["run_id"], settled("completed", expected.last_seq),
                    "completed")
    assert body["calls"][0]["resumed"] == 1
    [resume] = [r for r in requests_to(sim, "openai-responses") if r["method"] == "GET"]
    assert resume["query"]["stream"] == "true" and int(resume["query"]["starting_after"]) >= 0
    assert_events_as_normalized(gateway, started["run_id"], recording)


def test_a_cut_stream_that_cannot_resume_ends_truncated_never_completed(gateway, sim):
    # Not background: OpenAI cannot stream it again (openai.md §9); it is read back once and,
    # still in progress there, the run ends with the truncation error.
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/cut-after-5"))
    body = wait_run(gateway, started["run_id"], lambda b: call_over(b) and b["state"]
                    and b["state"]["last_error"], "the truncation reaching the run")
    call = body["calls"][0]
    assert call["resumed"] == 0 and call["error"] is None
    assert call["notes"][-1] == "the stream was cut and cannot be resumed; read the object back"
    [read_back] = [r for r in requests_to(sim, "openai-responses") if r["method"] == "GET"]
    assert "stream" not in read_back["query"]
    state = body["state"]
    assert state["status"] == "in_progress" and state["needs_reconciliation"] is True
    assert state["last_error"].startswith("stream_truncated")
    kinds = [kind for _, kind, _ in sse_events(gateway, started["run_id"], follow="false")]
    assert "run.finished" not in kinds and kinds[-1] == "error"


def test_429_then_success_is_one_run_with_one_set_of_events(gateway, sim, caplog):
    caplog.set_level(logging.INFO)
    recording = "openai-responses/text-with-usage.sse"
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/rate-limited-once"))
    expected = run_state_of(offline(recording))
    wait_run(gateway, started["run_id"], settled("completed", expected.last_seq), "completed")
    attempts = requests_to(sim, "openai-responses")
    assert [r["status"] for r in attempts] == [429, 200]
    assert_events_as_normalized(gateway, started["run_id"], recording)
    # The retry is logged (with the provider's message), the credential never.
    assert "HTTP 429; attempt 1 of 4, retrying" in caplog.text
    assert OPENAI_KEY not in caplog.text


def test_anthropic_overloaded_529_is_retried(gateway, sim):
    started = start_run(gateway, neutral("anthropic", "anthropic-messages",
                                         "sim:anthropic-messages/overloaded-once"))
    wait_run(gateway, started["run_id"], settled("completed"), "completed")
    assert [r["status"] for r in requests_to(sim, "anthropic-messages")] == [529, 200]


def test_an_error_answer_is_the_runs_outcome(gateway, sim):
    # A recorded 429 body every time: the retries give up and the provider's error is the run's.
    started = start_run(gateway, neutral("anthropic", "anthropic-messages",
                                         "sim:anthropic-messages/error-body-rate-limit"))
    body = wait_run(gateway, started["run_id"], settled("failed"), "failed")
    assert len(requests_to(sim, "anthropic-messages")) == 4  # call_attempts
    assert "429" in body["calls"][0]["error"]
    errors = [data for _, kind, data in sse_events(gateway, started["run_id"], follow="false")
              if kind == "error"]
    assert errors and errors[0]["http_status"] == 429


# --- background runs --------------------------------------------------------------------------


def test_a_background_run_is_polled_to_completion(gateway, sim):
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/text-with-usage", background=True))
    assert started["stream"] is False
    body = wait_run(gateway, started["run_id"], settled("completed"), "completed")
    call = body["calls"][0]
    assert call["provider_status"] == "completed" and call["polls"] >= 2
    methods = [r["method"] for r in requests_to(sim, "openai-responses")]
    assert methods[0] == "POST" and set(methods[1:]) == {"GET"}
    assert requests_to(sim, "openai-responses")[0]["body"]["background"] is True


def test_a_background_run_that_never_ends_is_read_once_more_at_the_timeout(start_gateway, sim):
    gateway = start_gateway(terminal_timeout_s=1.0)
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/background-long", background=True))
    body = wait_run(gateway, started["run_id"], call_over, "the call's end")
    call = body["calls"][0]
    assert call["provider_status"] == "in_progress" and call["error"] is None
    assert "no terminal status after 1 s" in call["notes"][-1]
    polls = [r for r in requests_to(sim, "openai-responses") if r["method"] == "GET"]
    # The last read came at the deadline, after the backoff's earlier polls.
    assert len(polls) == call["polls"] >= 3
    assert polls[-1]["time"] - requests_to(sim, "openai-responses")[0]["time"] >= 1.0
    state = wait_run(gateway, started["run_id"],
                     lambda b: b["state"] and b["state"]["status"] == "in_progress",
                     "the provider's in_progress on runs")["state"]
    # As the provider says: not failed, not truncated — the job may still finish there.
    assert state["needs_reconciliation"] is False and state["last_error"] is None


def test_cancel_ends_the_run_cancelled_only_when_the_provider_confirms(gateway, sim):
    # The provider answers the cancel with in_progress, and two polls after it too.
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/background-cancel-slowly",
                                         background=True))
    run_id = started["run_id"]
    wait_run(gateway, run_id, lambda b: b["calls"][0]["provider_object_id"], "the object id")
    response = httpx.post(f"{gateway.url}/v1/runs/{run_id}/cancel", timeout=30)
    assert response.status_code == 202, response.text
    assert response.json()["provider_status"] == "in_progress"
    body = wait_run(gateway, run_id, settled("cancelled"), "cancelled")
    assert body["state"]["needs_reconciliation"] is False
    cancels = [r for r in requests_to(sim, "openai-responses") if r["path"].endswith("/cancel")]
    assert len(cancels) == 1
    # The end came from a poll after the cancel, not from the cancel's own answer.
    [finished] = [data for _, kind, data in sse_events(gateway, run_id, follow="false")
                  if kind == "run.finished"]
    assert finished["status"] == "cancelled" and finished["frame_id"].endswith(":poll")
    again = httpx.post(f"{gateway.url}/v1/runs/{run_id}/cancel", timeout=30)
    assert again.status_code == 409 and "already ended" in again.json()["error"]


def test_a_streaming_call_cannot_be_cancelled(gateway, sim):
    started = start_run(gateway, neutral("openai", "openai-chat", "sim:openai-chat/text"))
    wait_run(gateway, started["run_id"], settled("completed"), "completed")
    response = httpx.post(f"{gateway.url}/v1/runs/{started['run_id']}/cancel", timeout=10)
    assert response.status_code == 409 and "background" in response.json()["error"]


def test_a_background_run_completed_by_webhook_while_a_poll_is_in_flight_has_one_end(
        gateway, sim):
    # Each poll takes 1.5 s at the provider; the first says in_progress, the next completed.
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/background-slow-poll",
                                         background=True))
    run_id = started["run_id"]
    # The run claimed its response id (run.started reached the processor), and the gateway's
    # first poll is at the provider, when the webhook comes.
    body = wait_run(gateway, run_id, lambda b: b["state"] is not None
                    and b["calls"][0]["provider_object_id"] and any(
                        r["method"] == "GET" for r in requests_to(sim, "openai-responses")),
                    "the run's first state and its first poll")
    response_id = body["calls"][0]["provider_object_id"]
    deliver_completed(gateway, response_id)
    body = wait_run(gateway, run_id, settled("completed"), "completed")
    gets = [r for r in requests_to(sim, "openai-responses") if r["method"] == "GET"]
    # The webhook's fetch reached the provider while the gateway's first poll was being
    # answered (each answer takes 1.5 s), and both paths read the response.
    assert len(gets) >= 3 and gets[1]["time"] - gets[0]["time"] < 1.5
    events = sse_events(gateway, run_id, follow="false")
    assert [kind for _, kind, _ in events].count("run.finished") == 1
    assert [seq for seq, _, _ in events] == list(range(len(events)))
    assert body["state"]["needs_reconciliation"] is False


def test_a_webhook_for_a_run_a_gateway_knows_is_keyed_by_that_run(start_gateway, sim, settings):
    # The race the processor cannot close (a webhook processed before the stream announcing its
    # object: a run of its own, "Run key resolution") is closed at the edge for every run a
    # gateway knows: the one that made the call at once, any other once `runs` shows the run.
    maker = start_gateway()
    run_id = start_run(maker, neutral("openai", "openai-responses",
                                      "sim:openai-responses/refusal"))["run_id"]
    expected = run_state_of(offline("openai-responses/refusal.sse"))
    body = wait_run(maker, run_id, settled(expected.status, expected.last_seq), expected.status)
    response_id = body["calls"][0]["provider_object_id"]
    assert response_id and response_id != run_id
    assert deliver_completed(maker, response_id)["run_key"] == run_id
    other = start_gateway()  # made no call: it knows the run from `runs`, once it has read it
    deadline = time.monotonic() + SETTLE_S
    while (answer := httpx.get(f"{other.url}/v1/runs/{run_id}", timeout=30)).status_code == 503:
        assert time.monotonic() < deadline, answer.text  # 503: still reading `runs`
        time.sleep(0.1)
    wait_run(other, run_id, lambda b: b["state"] is not None
             and response_id in b["state"]["provider_object_ids"], "the run in the view")
    assert deliver_completed(other, response_id)["run_key"] == run_id
    # Another tenant's delivery naming the object is not keyed into this tenant's run.
    assert deliver_completed(other, response_id, tenant="acme")["run_key"] == response_id
    # The fetches those deliveries scheduled were keyed like them; the run, which has said all
    # of it, got nothing more from the deliveries or the fetched objects.
    def keys_of_fetched() -> list[str]:
        async def read() -> list[str]:
            return [r.value.run_key async for r in clients.read_records(settings, "frames",
                                                                          timeout=2.0)
                    if r.value.transport == "poll" and r.value.frame_id.startswith(
                        f"poll:{response_id}:")]
        return run(read())

    deadline = time.monotonic() + SETTLE_S
    while len(fetched := keys_of_fetched()) < 3:
        assert time.monotonic() < deadline, f"fetches published: {fetched}"
        time.sleep(0.2)
    assert sorted(fetched) == sorted([run_id, run_id, response_id])
    run(processed_to_end(settings, settings.topic("frames")))
    events = sse_events(maker, run_id, follow="false")
    assert [seq for seq, _, _ in events] == list(range(expected.last_seq + 1))
    assert [kind for _, kind, _ in events].count("run.finished") == 1
    assert get_run(other, run_id)["state"]["status"] == expected.status
    # The other tenant's delivery and fetch, keyed by the object id, reached the run through
    # its claim, and were refused there: dead-lettered, not applied.
    async def refused() -> list[Any]:
        return [r.value async for r in clients.read_records(settings, "dlq", timeout=2.0)
                if r.value.error_type == "TenantMismatch" and r.value.run_key == run_id]
    letters = run(refused())
    assert len(letters) == 2 and all("'acme'" in letter.reason for letter in letters)


# --- sessions -------------------------------------------------------------------------------


def test_events_resume_after_last_event_id(gateway, sim):
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/text-with-usage"))
    run_id = started["run_id"]
    # Followed live from the start: the stream ends by itself after run.finished.
    live = sse_events(gateway, run_id)
    assert live[-1][1] == "run.finished"
    assert [seq for seq, _, _ in live] == list(range(len(live)))
    rest = sse_events(gateway, run_id, headers={"last-event-id": "3"})
    assert rest == live[4:]
    assert sse_events(gateway, run_id, after=len(live) - 2, follow="false") == live[-1:]
    bad = httpx.get(f"{gateway.url}/v1/runs/{run_id}/events",
                    headers={"last-event-id": "x"}, timeout=10)
    assert bad.status_code == 400
    assert httpx.get(f"{gateway.url}/v1/runs/{run_id}/events", params={"after": -2},
                     timeout=10).status_code == 400
    # EventSource reconnects after the stream ended: answered 204, which stops it.
    wait_run(gateway, run_id, settled("completed", len(live) - 1), "the final state")
    done = httpx.get(f"{gateway.url}/v1/runs/{run_id}/events",
                     headers={"last-event-id": str(len(live) - 1)}, timeout=10)
    assert done.status_code == 204
    unknown = httpx.get(f"{gateway.url}/v1/runs/run_nope/events", timeout=10)
    assert unknown.status_code == 404 and "run_nope" in unknown.json()["error"]


def test_a_session_switches_provider_mid_turn_and_every_request_fits_its_schema(gateway, sim):
    # Call 1 on OpenAI Responses asks for two tool calls; the neutral messages of the run plus
    # the tool results go on Claude, then on Gemini — one run, one agentic turn.
    first = start_run(gateway, neutral("openai", "openai-responses",
                                       "sim:openai-responses/tool-call-parallel"))
    run_id = first["run_id"]
    wait_run(gateway, run_id, settled("waiting_for_tool"), "waiting_for_tool")
    history = httpx.get(f"{gateway.url}/v1/runs/{run_id}/messages", timeout=30).json()
    # Both sides (issue #17): the request's user message (its input packet), then the model's.
    assert history["sides"] == {"request": 1, "model": 1}
    _asked, assistant = history["messages"]
    calls = [p for p in assistant["parts"] if p["type"] == "tool_call"]
    assert len(calls) == 2 and all(c["tool_name"] and c["tool_call_id"] for c in calls)
    results = {"role": "tool", "parts": [
        {"type": "tool_result", "tool_name": c["tool_name"], "tool_call_id": c["tool_call_id"],
         "output": "14 C"} for c in calls]}
    tools = [{"name": name, "parameters": {"type": "object", "properties": {}}}
             for name in sorted({c["tool_name"] for c in calls})]
    transcript = [{"role": "user", "parts": [{"type": "text", "text": "Weather?"}]},
                  assistant, results]
    second = start_run(gateway, {**neutral("anthropic", "anthropic-messages",
                                           "sim:anthropic-messages/text"),
                                 "run_id": run_id, "transcript": transcript, "tools": tools})
    assert second["run_id"] == run_id and second["call"] != first["call"]
    wait_run(gateway, run_id, lambda b: len(b["calls"]) == 2 and call_over(b)
             and b["state"]["status"] == "completed", "the second call completing the run")
    [claude] = requests_to(sim, "anthropic-messages")
    assert claude["status"] == 200 and not claude.get("problems")
    assert validate_request("anthropic-messages", claude["body"]) == []
    sent = claude["body"]["messages"]
    assert [block["type"] for block in sent[1]["content"]] == ["tool_use", "tool_use"]
    assert {block["tool_use_id"] for block in sent[2]["content"]} == {c["tool_call_id"]
                                                                      for c in calls}
    # The same history rendered for Gemini fits its schema too (the session could go on there).
    gemini = build(NeutralRequest.model_validate({**neutral("google", "gemini-generate",
                                                            "gemini-2.5-flash"),
                                                  "transcript": transcript, "tools": tools}),
                   "gemini-generate", "gemini-2.5-flash", stream=True)
    assert validate_request("gemini-generate", gemini.body) == []
    events = sse_events(gateway, run_id, follow="false")
    assert [kind for _, kind, _ in events].count("run.started") == 2
    assert [seq for seq, _, _ in events] == list(range(len(events)))


def test_a_second_call_while_one_is_in_flight_is_409(gateway, sim):
    body = neutral("openai", "openai-responses", "sim:openai-responses/background-long",
                   background=True, run_id=f"run_{secrets.token_hex(6)}")
    start_run(gateway, body)
    answer = httpx.post(f"{gateway.url}/v1/runs", json=body, timeout=10)
    assert answer.status_code == 409 and "in flight" in answer.json()["error"]
    httpx.post(f"{gateway.url}/v1/runs/{body['run_id']}/cancel", timeout=30)


def test_a_retried_post_with_the_same_idempotency_key_sends_nothing_twice(gateway, sim):
    body = neutral("openai", "openai-chat", "sim:openai-chat/text")
    key = {"idempotency-key": f"key-{secrets.token_hex(6)}"}
    first = httpx.post(f"{gateway.url}/v1/runs", json=body, headers=key, timeout=30)
    assert first.status_code == 202 and first.headers["location"].endswith(first.json()["run_id"])
    wait_run(gateway, first.json()["run_id"], settled("completed"), "completed")
    again = httpx.post(f"{gateway.url}/v1/runs", json=body, headers=key, timeout=30)
    assert again.status_code == 202 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert len(requests_to(sim, "openai-chat")) == 1
    other = httpx.post(f"{gateway.url}/v1/runs", json={**body, "max_output_tokens": 9},
                       headers=key, timeout=30)
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    assert len(requests_to(sim, "openai-chat")) == 1


def test_a_run_that_ended_takes_no_next_call(gateway, sim):
    started = start_run(gateway, neutral("openai", "openai-chat", "sim:openai-chat/text"))
    wait_run(gateway, started["run_id"], settled("completed"), "completed")
    answer = httpx.post(f"{gateway.url}/v1/runs", timeout=10, json={
        **neutral("openai", "openai-chat", "sim:openai-chat/text"), "run_id": started["run_id"]})
    assert answer.status_code == 409 and answer.json()["code"] == "run_ended"
    assert len(requests_to(sim, "openai-chat")) == 1


def test_a_second_call_on_the_same_api_that_is_cut_is_reported(gateway, sim):
    # Call 1 asks for tools; call 2 (same run, same API) is cut before its terminal event.
    first = start_run(gateway, neutral("openai", "openai-responses",
                                       "sim:openai-responses/tool-call-parallel"))
    run_id = first["run_id"]
    wait_run(gateway, run_id, settled("waiting_for_tool"), "waiting_for_tool")
    start_run(gateway, {**neutral("openai", "openai-responses",
                                  "sim:openai-responses/truncated-mid-text"), "run_id": run_id})
    state = wait_run(gateway, run_id, lambda b: len(b["calls"]) == 2 and call_over(b)
                     and b["state"]["last_error"], "the truncation of call 2")["state"]
    assert state["status"] == "in_progress" and state["needs_reconciliation"] is True
    assert state["last_error"].startswith("stream_truncated")


def test_api_tokens_bind_each_caller_to_its_tenant(start_gateway, sim):
    acme, other = f"tok-{secrets.token_hex(8)}", f"tok-{secrets.token_hex(8)}"
    gateway = start_gateway(api_tokens={"acme": [acme], "other": [other]})
    body = neutral("openai", "openai-chat", "sim:openai-chat/text")
    anonymous = httpx.post(f"{gateway.url}/v1/runs", json=body, timeout=10)
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"] == "Bearer"
    wrong = httpx.post(f"{gateway.url}/v1/runs", json=body, timeout=10,
                       headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401
    as_acme = {"authorization": f"Bearer {acme}"}
    posing = httpx.post(f"{gateway.url}/v1/runs", json={**body, "tenant": "other"},
                        headers=as_acme, timeout=10)
    assert posing.status_code == 403
    assert sim.simulator.requests() == []
    started = httpx.post(f"{gateway.url}/v1/runs", json=body, headers=as_acme, timeout=10).json()
    run_id = started["run_id"]
    deadline = time.monotonic() + SETTLE_S
    while True:
        seen = httpx.get(f"{gateway.url}/v1/runs/{run_id}", headers=as_acme, timeout=10).json()
        if seen["state"] and seen["state"]["status"] == "completed":
            break
        assert time.monotonic() < deadline, seen
        time.sleep(0.1)
    assert seen["state"]["tenant"] == "acme"
    # Another tenant's token does not find the run, its events or its messages.
    as_other = {"authorization": f"Bearer {other}"}
    for path in ("", "/events", "/messages"):
        answer = httpx.get(f"{gateway.url}/v1/runs/{run_id}{path}", headers=as_other, timeout=10)
        assert answer.status_code == 404, path


def test_a_run_left_in_progress_by_a_stopped_gateway_is_reconciled_by_another(start_gateway,
                                                                             sim):
    # The first gateway stops while it polls a background run (scaled down: its instance id
    # does not come back); the second one knows the run from the runs topic only, and — the
    # calls record still naming the first one's call, which it left in flight — takes the call
    # over explicitly and reads its provider object back to the end.
    first = start_gateway(poll_initial_s=0.3, poll_max_s=0.3)
    started = start_run(first, neutral("openai", "openai-responses",
                                       "sim:openai-responses/background-8-polls", background=True))
    run_id = started["run_id"]
    wait_run(first, run_id, lambda b: b["state"] and b["state"]["provider_object_ids"],
             "the run's object id on runs")
    first.stop()
    second = start_gateway(call_lease_s=600.0)  # the first not silent long enough to take over
    body = wait_run(second, run_id, lambda b: b["state"] is not None, "the run on runs")
    assert body["calls"] == [] and body["state"]["status"] in ("queued", "in_progress")
    refused = httpx.post(f"{second.url}/v1/runs/{run_id}/reconcile", timeout=30)
    assert refused.status_code == 409 and "in flight on gateway instance" in refused.text
    answer = httpx.post(f"{second.url}/v1/runs/{run_id}/reconcile", params={"take_over": "true"},
                        timeout=30)
    assert answer.status_code == 202, answer.text
    assert answer.json()["provider_object_id"] == body["state"]["provider_object_ids"][-1]
    wait_run(second, run_id, settled("completed"), "completed")
    events = sse_events(second, run_id, follow="false")
    assert [kind for _, kind, _ in events].count("run.finished") == 1
    assert [seq for seq, _, _ in events] == list(range(len(events)))
    again = httpx.post(f"{second.url}/v1/runs/{run_id}/reconcile", timeout=30)
    assert again.status_code == 409 and "ended completed" in again.json()["error"]
    streamed = start_run(second, neutral("openai", "openai-chat", "sim:openai-chat/text"))
    wait_run(second, streamed["run_id"], settled("completed"), "completed")
    refused = httpx.post(f"{second.url}/v1/runs/{streamed['run_id']}/reconcile", timeout=30)
    assert refused.status_code == 409


# --- a provider event larger than the adapters take (adapters/limits.py) ---------------------


def oversized_event_server(deltas: list[str], oversized: int) -> ServedApp:
    """A Chat Completions provider on a real socket: ``deltas`` as chunks, then one SSE event of
    ``oversized`` bytes (sent in 1 MiB writes), then the chunk that would have finished it."""
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    chunk = {"id": "chatcmpl-big", "object": "chat.completion.chunk", "model": "gpt-4o-mini"}

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return b"data: " + orjson.dumps({**chunk, "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"

    async def body() -> Any:
        for text in deltas:
            yield event({"content": text})
        head = b'data: {"id":"chatcmpl-big","choices":[{"index":0,"delta":{"content":"'
        yield head
        for _ in range(oversized // (1 << 20) + 1):
            yield b"x" * (1 << 20)
        yield b'"}}]}\n\n' + event({}, "stop") + b"data: [DONE]\n\n"

    async def complete(request: Any) -> StreamingResponse:
        await request.body()
        return StreamingResponse(body(), media_type="text/event-stream")

    return serve_in_thread(Starlette(routes=[Route("/{path:path}", complete, methods=["POST"])]),
                           name="oversized provider")


def test_a_provider_event_over_the_input_limit_ends_the_stream_truncated(start_gateway, settings):
    from modelevents.adapters.limits import DEFAULT_LIMITS

    deltas = ["Hello", ", wor", "ld"]
    with oversized_event_server(deltas, DEFAULT_LIMITS.max_event_bytes + (1 << 20)) as provider:
        gateway = start_gateway(providers={"openai": ProviderConfig(base_url=provider.url,
                                                                    api_key=OPENAI_KEY)})
        started = start_run(gateway, neutral("openai", "openai-chat", "sim:oversized"))
        run_id = started["run_id"]
        body = wait_run(gateway, run_id, lambda b: call_over(b) and b["state"]
                        and b["state"]["last_error"], "the truncation reaching the run")
    call = body["calls"][0]
    # The call's answer says where and why the stream ended …
    assert call["frames"] == len(deltas)
    assert "over the gateway's limit" in call["error"], call
    assert f"{DEFAULT_LIMITS.max_event_bytes:,}" in call["error"]
    [note] = call["notes"]
    assert note.endswith(f".s0 cut after {len(deltas)} frames at an SSE event over "
                         f"{DEFAULT_LIMITS.max_event_bytes:,} bytes; the run ends truncated")
    # … what came before the event is kept, and the worker ends the run truncated, never done.
    state = body["state"]
    assert state["status"] == "in_progress" and state["needs_reconciliation"] is True
    assert state["last_error"].startswith("stream_truncated")
    events = sse_events(gateway, run_id, follow="false")
    assert "".join(data["text"] for _, kind, data in events if kind == "text.delta") == "".join(
        deltas)
    assert "run.finished" not in [kind for _, kind, _ in events] and events[-1][1] == "error"
    # The gateway still serves runs.
    assert httpx.get(f"{gateway.url}/readyz", timeout=10).status_code == 200
