"""The drop-in proxy with the node clients nobody here wrote (issue #29): the ``openai`` npm
package and the Vercel AI SDK (``ai`` with ``@ai-sdk/openai`` and ``@ai-sdk/anthropic``), as
tools/node-clients pins them, under node. Each scenario (node_clients/*.mjs) runs once against
the provider (the simulator) directly and once through ``/proxy/...``: the SDK must parse the
same — streamed text, tool calls, usage, errors, a 429 with ``retry-after-ms`` retried — and each
proxied run's events on Kafka must be what ``normalize_bytes`` makes of the bytes the SDK got.
Real broker, real worker, one gateway in a thread for the module; the two node processes run in
parallel, their scenarios concurrently."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from modelevents.services.simulator.server import SimulatorHandle
from tests.integration.gateway.proxy_clients import (
    RUN_ID_HEADER,
    assert_run_is_normalized_bytes,
    proxy_urls,
    wait_state,
)
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    serve_gateway,
    settings,
    simulator,
)
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.kafka

NODE_CLIENTS = REPO_ROOT / "tools" / "node-clients"
RUN_MJS = REPO_ROOT / "tests" / "integration" / "gateway" / "node_clients" / "run.mjs"
NODE_TIMEOUT_S = 120.0
RETRY_AFTER_MS = "20"  # what the simulator's 429 says (services/simulator/provider_http.py)
# Headers set anew on every answer (the gateway's server sends its own date and server), and the
# body's length, which a relayed stream may send chunked instead.
PER_ANSWER = {"date", "server", "x-request-id", "request-id", "content-length",
              "transfer-encoding"}


@dataclass(frozen=True)
class Scenario:
    """What a user relies on in a scenario's result (``facts`` of it, asserted beside the whole
    comparison), the statuses of its HTTP calls and the state its last run settles in."""

    facts: Callable[[dict[str, Any]], dict[str, Any]]
    expected: dict[str, Any]
    statuses: tuple[int, ...] = (200,)
    settles_in: str = "completed"


def chat_stream(r: dict[str, Any]) -> dict[str, Any]:
    return {"text": r["text"], "finish": r["finish"][-1],
            "usage": [u["total_tokens"] for u in r["usage"]]}


def chat_object(r: dict[str, Any]) -> dict[str, Any]:
    choice = r["completion"]["choices"][0]
    return {"finish": choice["finish_reason"],
            "calls": [(c["function"]["name"], c["function"]["arguments"])
                      for c in choice["message"]["tool_calls"]],
            "usage": r["completion"]["usage"]["total_tokens"]}


def responses_stream(r: dict[str, Any]) -> dict[str, Any]:
    return {"last": r["types"][-1], "calls": [name for name, _, _ in r["calls"]],
            "usage": r["usage"]["total_tokens"]}


def sdk_error(r: dict[str, Any]) -> dict[str, Any]:
    return {k: r["error"][k] for k in ("class", "status", "code", "retryAfterMs")}


def ai_sdk(r: dict[str, Any]) -> dict[str, Any]:
    return {"text": r["text"], "finish": r["finishReason"],
            "calls": [(c["toolName"], c["input"]) for c in r["toolCalls"]],
            "usage": (r["usage"]["inputTokens"], r["usage"]["outputTokens"])}


HELLO = "Hello, wörld 👋"  # the text of openai-responses/text-with-usage.sse
SCENARIOS = {
    "openai-npm/chat-stream": Scenario(chat_stream, {"text": "4", "finish": "stop",
                                                     "usage": [21]}),
    "openai-npm/chat-object": Scenario(
        chat_object, {"finish": "tool_calls", "calls": [("get_weather", '{"city": "Paris"}')],
                      "usage": 76}, settles_in="waiting_for_tool"),
    "openai-npm/responses-stream": Scenario(
        responses_stream, {"last": "response.completed", "calls": ["get_weather"] * 2,
                           "usage": 100}, settles_in="waiting_for_tool"),
    "openai-npm/rate-limited-retried": Scenario(lambda r: {"text": r["text"]}, {"text": HELLO},
                                                statuses=(429, 200)),
    "openai-npm/rate-limited-raised": Scenario(
        sdk_error, {"class": "RateLimitError", "status": 429, "code": "rate_limit_exceeded",
                    "retryAfterMs": RETRY_AFTER_MS}, statuses=(429,), settles_in="failed"),
    "ai-sdk/openai-responses": Scenario(
        ai_sdk, {"text": "", "finish": "tool-calls", "usage": (60, 40),
                 "calls": [("get_weather", {"city": "Paris"}),
                           ("get_weather", {"city": "Rome", "unit": "c"})]},
        settles_in="waiting_for_tool"),
    "ai-sdk/openai-chat": Scenario(
        ai_sdk, {"text": "", "finish": "tool-calls", "usage": (61, 15),
                 "calls": [("get_weather", {"city": "Paris"})]}, settles_in="waiting_for_tool"),
    "ai-sdk/anthropic": Scenario(
        ai_sdk, {"text": "", "finish": "tool-calls", "usage": (412, 38),
                 "calls": [("get_weather", {"city": "Oslo"})]}, settles_in="waiting_for_tool"),
    "ai-sdk/rate-limited-retried": Scenario(
        ai_sdk, {"text": HELLO, "finish": "stop", "calls": [], "usage": (40, 20)},
        statuses=(429, 200)),
}


def sdk_view(result: Any, scenario: str) -> Any:
    """What the SDK parsed, less what differs on every answer: the AI SDK hands the caller the
    response's headers (compared apart), and stamps a Claude response with the time it read it
    (a Claude stream carries none)."""
    dropped = {"headers"} | ({"timestamp"} if scenario == "ai-sdk/anthropic" else set())
    if isinstance(result, dict):
        return {k: sdk_view(v, scenario) for k, v in result.items() if k not in dropped}
    if isinstance(result, list):
        return [sdk_view(v, scenario) for v in result]
    return result


def recording_of(exchange: dict[str, Any]) -> bytes:
    """What ``modelevents normalize`` is given for an exchange: the body the SDK got, or for an
    error answer a one-call VCR cassette of it, since only a recording with its HTTP status says
    what the status said (a 429's body alone does not)."""
    body = base64.b64decode(exchange["body"])
    if exchange["status"] < 400:
        return body
    return yaml.safe_dump({"interactions": [{
        "request": {"method": exchange["method"], "uri": exchange["path"]},
        "response": {"status": {"code": exchange["status"]},
                     "headers": {k: [v] for k, v in exchange["headers"].items()},
                     "body": {"string": body.decode()}}}]}).encode()


@pytest.fixture(scope="module")
def installed() -> None:
    """tools/node-clients installed as its lockfile pins it (npm ci; a no-op once done)."""
    done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "npm-ci.sh"), str(NODE_CLIENTS)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def gateway(settings: PipelineSettings, simulator: SimulatorHandle
            ) -> Iterator[ServedApp]:
    served = serve_gateway(settings, simulator)
    yield served
    served.stop()


def run_node(targets: dict[str, str], session: str) -> dict[str, Any]:
    """Every scenario against ``targets`` in one node process; its results by scenario."""
    done = subprocess.run(["node", str(RUN_MJS), json.dumps(targets), session, *SCENARIOS],
                          capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def outcomes(installed: None, gateway: ServedApp, simulator: SimulatorHandle
             ) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Per scenario: (directly to the simulator, through the proxy), each with the SDK's
    ``result`` and its HTTP ``exchanges``; the two node processes in parallel."""
    direct_urls, via_proxy = simulator.urls(), proxy_urls(gateway)
    token = secrets.token_hex(4)
    with ThreadPoolExecutor(2) as pool:
        direct = pool.submit(run_node, {"openai": direct_urls["openai"],
                                        "anthropic": direct_urls["anthropic"]},
                             f"direct-{token}")
        proxied = pool.submit(run_node, {"openai": via_proxy["openai"],
                                         "anthropic": via_proxy["anthropic"]},
                              f"proxy-{token}")
        direct_results, proxied_results = direct.result(), proxied.result()
    return {name: (direct_results[name], proxied_results[name]) for name in SCENARIOS}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_sdk_parses_through_the_proxy_what_it_parses_from_the_provider(
        outcomes, scenario) -> None:
    direct, proxied = outcomes[scenario]
    assert "thrown" not in direct, direct["thrown"]
    assert "thrown" not in proxied, proxied["thrown"]
    expected = SCENARIOS[scenario]
    assert expected.facts(proxied["result"]) == expected.expected
    assert sdk_view(proxied["result"], scenario) == sdk_view(direct["result"], scenario)
    # The same calls, answered the same: statuses, and the provider's headers reach the SDK.
    assert [e["status"] for e in direct["exchanges"]] == list(expected.statuses)
    assert [e["status"] for e in proxied["exchanges"]] == list(expected.statuses)
    for sent, relayed in zip(direct["exchanges"], proxied["exchanges"], strict=True):
        provider_headers = {k: v for k, v in sent["headers"].items() if k not in PER_ANSWER}
        assert {k: relayed["headers"].get(k) for k in provider_headers} == provider_headers
        assert relayed["headers"][RUN_ID_HEADER]
        assert "," not in relayed["headers"]["server"], "one server, not the provider's too"
        if relayed["status"] == 429:
            assert relayed["headers"]["retry-after-ms"] == RETRY_AFTER_MS


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_each_proxied_call_is_a_run_whose_events_are_the_normalized_bytes(
        outcomes, gateway, scenario) -> None:
    _, proxied = outcomes[scenario]
    assert "thrown" not in proxied, proxied["thrown"]
    for exchange in proxied["exchanges"]:
        run_id = exchange["headers"][RUN_ID_HEADER]
        kinds = assert_run_is_normalized_bytes(gateway, run_id, recording_of(exchange))
        # Each HTTP call its own run: a refused attempt failed, as the provider said.
        settles_in = "failed" if exchange["status"] == 429 else SCENARIOS[scenario].settles_in
        assert wait_state(gateway, run_id)["status"] == settles_in
        if settles_in == "waiting_for_tool":
            assert "tool.call" in kinds
