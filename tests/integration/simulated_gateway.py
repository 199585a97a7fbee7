"""The gateway on the provider simulator, the bring-up that the gateway, tool, UI and audit tests
share: the simulator (module scope, reset for each test), the module's topics with one worker
(``settings``), ``start_gateway(**config overrides)`` for gateways served on loopback and used
once ready (``serve_gateway`` for a module's own), and the helpers that start, read and wait for
runs over real HTTP.

Import the fixtures a module uses by name; a module that needs another gateway (its own
providers, a gateway subprocess) defines its own ``start_gateway``.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import orjson
import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.adapters.sse import SSEDecoder
from modelevents.schemas.events import ModelEvent
from modelevents.services.cli.commands.demo import manifest_with_scenarios
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.gateway.config import GatewayConfig, ProviderConfig
from modelevents.services.kafka import clients, topics
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp, serve_in_thread
from modelevents.services.simulator.app import Simulator
from modelevents.services.simulator.scenarios import ScenarioRegistry
from modelevents.services.simulator.server import SimulatorHandle, run_in_thread
from tests.integration.conftest import unique_settings
from tests.integration.gateway.test_webhooks import sign
from tests.integration.pipeline import PARTITIONS, Worker, run
from tests.paths import FIXTURES

OPENAI_KEY = "sk-test-" + secrets.token_hex(16)
ANTHROPIC_KEY = "sk-ant-test-" + secrets.token_hex(16)
GEMINI_KEY = "AIza-test-" + secrets.token_hex(16)
WEBHOOK_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
ACME_WEBHOOK_SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
SETTLE_S = 90.0

# One scenario per provider API: (provider, api, scenario, the recording it serves).
ONE_PER_API = [
    ("openai", "openai-responses", "openai-responses/tool-call-parallel",
     "openai-responses/tool-call-parallel.sse"),
    ("openai", "openai-chat", "openai-chat/reasoning-then-text",
     "openai-chat/reasoning-then-text.sse"),
    ("anthropic", "anthropic-messages", "anthropic-messages/pause-turn-then-continuation",
     "anthropic-messages/pause-turn-then-continuation.sse"),
    ("google", "gemini-interactions", "gemini-interactions/google-search-cited-event-ids",
     "gemini-interactions/google-search-cited-event-ids.sse"),
    ("google", "gemini-generate", "gemini-generate/grounding-citations",
     "gemini-generate/grounding-citations.sse"),
]


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def simulator() -> Iterator[SimulatorHandle]:
    handle = run_in_thread(Simulator(ScenarioRegistry.default(with_corpus=False)).app)
    yield handle
    handle.stop()


@pytest.fixture
def sim(simulator: SimulatorHandle) -> SimulatorHandle:
    simulator.simulator.reset()
    return simulator


@pytest.fixture(scope="module")
def settings(kafka_broker: str, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[PipelineSettings]:
    """The module's topics and one worker for all its tests (every test makes runs of its own)."""
    made = unique_settings(kafka_broker, partitions=PARTITIONS)
    run(topics.ensure_topics(made))
    worker = Worker(made, tmp_path_factory.mktemp("gateway-runs"), "worker")
    try:
        worker.wait_ready()
        yield made
    finally:
        worker.close()
        run(topics.delete_topics(made))


def serve_gateway(settings: PipelineSettings, sim: SimulatorHandle, **overrides: Any
                  ) -> ServedApp:
    """A gateway on the simulator, served on loopback and returned once ready; the caller stops
    it."""
    values: dict[str, Any] = dict(
        # Each gateway a replica of its own (the same instance id would take up the
        # background calls an earlier one left in flight: gateway/test_replicas.py).
        instance_id=f"gw-{secrets.token_hex(4)}",
        kafka=settings, ack_timeout_s=5.0, poll_initial_s=0.05, poll_max_s=0.2,
        call_backoff_s=0.05, fetch_backoff_s=0.05,
        providers={
            "openai": ProviderConfig(base_url=sim.base_url, api_key=OPENAI_KEY,
                                     webhook_secrets={"default": [WEBHOOK_SECRET],
                                                      "acme": [ACME_WEBHOOK_SECRET]}),
            "anthropic": ProviderConfig(base_url=sim.base_url, api_key=ANTHROPIC_KEY),
            "gemini": ProviderConfig(base_url=sim.base_url, api_key=GEMINI_KEY),
        })
    values.update(overrides)
    served = serve_in_thread(create_app(GatewayConfig(**values),
                                        manifest=manifest_with_scenarios(load_manifest())))
    # Used once ready, as a load balancer would: before, a GET of a run may be a 503
    # "still reading" (gateway/test_lifespan.py tests that).
    deadline = time.monotonic() + SETTLE_S
    while httpx.get(f"{served.url}/readyz", timeout=30).status_code != 200:
        if time.monotonic() > deadline:
            served.stop()
            raise AssertionError("the gateway did not get ready")
        time.sleep(0.05)
    return served


@pytest.fixture
def start_gateway(settings: PipelineSettings, sim: SimulatorHandle
                  ) -> Iterator[Callable[..., ServedApp]]:
    started: list[ServedApp] = []

    def start(**overrides: Any) -> ServedApp:
        served = serve_gateway(settings, sim, **overrides)
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def gateway(start_gateway: Callable[..., ServedApp]) -> ServedApp:
    return start_gateway()


# --- helpers --------------------------------------------------------------------------------


def neutral(provider: str, api: str | None, model: str, **extra: Any) -> dict[str, Any]:
    target = {"provider": provider, "model": model, **({"api": api} if api else {})}
    return {"transcript": [{"role": "user", "parts": [{"type": "text", "text": "Hello"}]}],
            "target": target, "max_output_tokens": 256, **extra}


def start_run(gateway: ServedApp, body: dict[str, Any], expect: int = 202) -> dict[str, Any]:
    response = httpx.post(f"{gateway.url}/v1/runs", json=body, timeout=30)
    assert response.status_code == expect, response.text
    return response.json()


def get_run(gateway: ServedApp, run_id: str) -> dict[str, Any]:
    response = httpx.get(f"{gateway.url}/v1/runs/{run_id}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def wait_run(gateway: ServedApp, run_id: str, done: Callable[[dict[str, Any]], bool],
             what: str, timeout: float = SETTLE_S) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    body = get_run(gateway, run_id)
    while not done(body):
        assert time.monotonic() < deadline, f"run {run_id}: {what} did not happen: {body}"
        time.sleep(0.1)
        body = get_run(gateway, run_id)
    return body


def call_over(body: dict[str, Any]) -> bool:
    return bool(body["calls"]) and not body["calls"][-1]["in_flight"]


def settled(status: str, last_seq: int | None = None) -> Callable[[dict[str, Any]], bool]:
    def done(body: dict[str, Any]) -> bool:
        state = body["state"]
        return (call_over(body) and state is not None and state["status"] == status
                and (last_seq is None or state["last_seq"] == last_seq))
    return done


def sse_events(gateway: ServedApp, run_id: str, headers: dict[str, str] | None = None,
               **params: Any) -> list[tuple[int, str, dict[str, Any]]]:
    """(id, event, data) of every SSE event ``GET /v1/runs/{id}/events`` sends until it ends."""
    out = []
    decoder = SSEDecoder(strict=True)
    with httpx.stream("GET", f"{gateway.url}/v1/runs/{run_id}/events", params=params,
                      headers=headers or {}, timeout=SETTLE_S) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for chunk in response.iter_raw():
            for message in decoder.feed(chunk):
                out.append((int(message.id), message.event, orjson.loads(message.data)))
    return out


def comparable(projection: dict[str, Any]) -> dict[str, Any]:
    """A projection without what differs by transport and run: ids, seq, times, cursors."""
    return {k: v for k, v in projection.items()
            if k not in ("event_id", "frame_id", "run_id", "seq", "received_at", "cursor",
                         "index", "transport")}


def offline(recording: str, run_id: str | None = None) -> list[ModelEvent]:
    """What ``modelevents normalize`` gives for the recording (as run ``run_id``: ids the
    adapters synthesize derive from the run id)."""
    path = FIXTURES / recording
    return normalize_bytes(path.read_bytes(), run_id=run_id, source_name=path.name).events


def assert_events_as_normalized(gateway: ServedApp, run_id: str, recording: str) -> None:
    received = sse_events(gateway, run_id, follow="false")
    expected = offline(recording, run_id)
    assert [seq for seq, _, _ in received] == list(range(len(expected))), recording
    assert [kind for _, kind, _ in received] == [e.kind for e in expected], recording
    assert [comparable(data) for _, _, data in received] == [
        comparable(orjson.loads(orjson.dumps(e.projection(), default=str))) for e in expected]


def requests_to(sim: SimulatorHandle, api: str) -> list[dict[str, Any]]:
    return sim.simulator.requests(api)


def deliver_completed(gateway: ServedApp, response_id: str, tenant: str = "default",
                      ) -> dict[str, Any]:
    """OpenAI's signed ``response.completed`` webhook for the response, to the tenant's URL."""
    payload = orjson.dumps({"id": f"evt_{secrets.token_hex(6)}", "object": "event",
                            "created_at": int(time.time()), "type": "response.completed",
                            "data": {"id": response_id}})
    webhook_id, ts = f"wh_{secrets.token_hex(8)}", str(int(time.time()))
    secret = WEBHOOK_SECRET if tenant == "default" else ACME_WEBHOOK_SECRET
    delivered = httpx.post(f"{gateway.url}/webhooks/openai/{tenant}", content=payload, timeout=30,
                           headers={"webhook-id": webhook_id, "webhook-timestamp": ts,
                                    "content-type": "application/json",
                                    "webhook-signature": sign(secret, webhook_id, ts, payload)})
    assert delivered.status_code == 200, delivered.text
    return delivered.json()


def frames_on_topic(settings: PipelineSettings) -> list[bytes]:
    async def read() -> list[bytes]:
        return [r.raw async for r in clients.read_records(settings, "frames", timeout=2.0)]
    return run(read())
