"""The simulator's ``model`` knob (services/simulator/app.py, recordings.reporting_model) over
real HTTP: a request's ``x-simulator-model``, or ``PUT /_simulator/model`` for every request,
makes every frame and object report that model as the one that answered — what a provider that
moved its alias to another snapshot does — and the adapters read the new name off the stream;
everything else is served as recorded, and ``{"model": null}`` (or a reset) brings the recorded
names back."""

from __future__ import annotations

import httpx
import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.services.simulator.app import Simulator
from modelevents.services.simulator.scenarios import ScenarioRegistry
from modelevents.services.simulator.server import run_in_thread
from tests.services.simulator.test_simulator import _ENDPOINTS

SNAPSHOT = "gpt-4o-mini-2099-01-01"
SCENARIOS = {
    "openai-responses": "openai-responses/text-with-usage",
    "openai-chat": "openai-chat/reasoning-then-text",
    "anthropic-messages": "anthropic-messages/pause-turn-then-continuation",
    "gemini-generate": "gemini-generate/grounding-citations",
    "gemini-interactions": "gemini-interactions/google-search-cited-event-ids",
}


@pytest.fixture(scope="module")
def served():
    handle = run_in_thread(Simulator(ScenarioRegistry.default(with_corpus=False)).app)
    yield handle
    handle.stop()


@pytest.fixture
def http(served):
    served.simulator.reset()
    with httpx.Client(base_url=served.base_url, timeout=60) as client:
        yield client


def _models(http: httpx.Client, api: str, headers: dict[str, str] | None = None
            ) -> tuple[set[str | None], bytes]:
    path, body = _ENDPOINTS[api]
    answer = http.post(path, json=body, headers={"x-simulator-scenario": SCENARIOS[api],
                                                 "x-simulator-chunk-seed": "off",
                                                 **(headers or {})})
    assert answer.status_code == 200, answer.text
    events = normalize_bytes(answer.content, api=api).events
    return {e.model for e in events if e.kind != "error"}, answer.content


@pytest.mark.parametrize("api", sorted(SCENARIOS))
def test_a_request_knob_makes_the_stream_report_another_model(http, api):
    recorded, as_recorded = _models(http, api)
    assert recorded and SNAPSHOT not in recorded
    reported, rewritten = _models(http, api, {"x-simulator-model": SNAPSHOT})
    assert reported == {SNAPSHOT}
    # Only the model's name changed: the rest is the recording, byte for byte.
    for name in recorded - {None}:
        as_recorded = as_recorded.replace(f'"{name}"'.encode(), f'"{SNAPSHOT}"'.encode())
    assert rewritten == as_recorded


def test_put_model_changes_what_every_answer_reports_until_cleared(http):
    recorded, _ = _models(http, "openai-responses")
    assert http.get("/_simulator/model").json() == {"model": None}
    assert http.put("/_simulator/model", json={"model": SNAPSHOT}).json() == {"model": SNAPSHOT}
    assert _models(http, "openai-responses")[0] == {SNAPSHOT}
    # Not streamed: the complete object reports it too.
    path, body = _ENDPOINTS["openai-responses"]
    whole = http.post(path, json={**body, "stream": False},
                      headers={"x-simulator-scenario": SCENARIOS["openai-responses"]})
    assert whole.json()["model"] == SNAPSHOT
    # A request's own knob wins over the simulator's setting.
    assert _models(http, "openai-responses", {"x-simulator-model": "other-1"})[0] == {"other-1"}
    assert http.put("/_simulator/model", json={"model": None}).json() == {"model": None}
    assert _models(http, "openai-responses")[0] == recorded
    assert http.put("/_simulator/model", json={"model": ""}).status_code == 400
    assert http.put("/_simulator/model", content=b"gpt").status_code == 400


def test_a_reset_brings_the_recorded_models_back(http, served):
    recorded, _ = _models(http, "anthropic-messages")
    served.simulator.report_model = SNAPSHOT
    assert _models(http, "anthropic-messages")[0] == {SNAPSHOT}
    http.post("/_simulator/reset")
    assert _models(http, "anthropic-messages")[0] == recorded
