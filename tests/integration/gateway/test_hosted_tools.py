"""Hosted tools under the tenant's policy over real HTTP (docs/hosted-tools.md): the gateway
(uvicorn, reading a real policy file) refuses a forbidden hosted tool with the router's 422
before anything reaches the provider simulator, and renders an allowed one with the tenant's
domain rules merged in — the simulator receives it, checked against the official SDK's request
type."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelevents.services.cli.commands.demo import manifest_with_scenarios
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.gateway.config import GatewayConfig, ProviderConfig
from modelevents.services.kafka import topics
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp, serve_in_thread
from modelevents.services.simulator.server import SimulatorHandle
from tests.integration.conftest import unique_settings
from tests.integration.pipeline import PARTITIONS, run
from tests.integration.simulated_gateway import (  # the simulator fixtures, shared
    call_over,
    neutral,
    sim,  # noqa: F401
    simulator,  # noqa: F401
    start_run,
    wait_run,
)

pytestmark = pytest.mark.kafka

SETTLE_S = 90.0
POLICY = """\
tenants:
  acme:
    tools: [get_weather]              # the tool executor's part of the same file
    hosted:
      tools: [web_search, mcp]
      allowed_domains: [python.org, example.com]
      blocked_domains: [evil.example]
      mcp_servers: [{label: docs, url: "https://mcp.example.com/sse"}]
  shy:
    hosted:
      tools: [web_search]
      blocked_domains: [evil.example]
"""


@pytest.fixture(scope="module")
def settings(kafka_broker: str) -> Iterator[PipelineSettings]:
    made = unique_settings(kafka_broker, partitions=PARTITIONS)
    run(topics.ensure_topics(made))
    yield made
    run(topics.delete_topics(made))


@pytest.fixture
def gateway(settings: PipelineSettings, sim: SimulatorHandle, tmp_path: Path
            ) -> Iterator[ServedApp]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    config = GatewayConfig(
        instance_id=f"gw-{secrets.token_hex(4)}", kafka=settings, ack_timeout_s=5.0,
        call_backoff_s=0.05, policy=policy,
        providers={name: ProviderConfig(base_url=sim.base_url, api_key=f"key-{name}")
                   for name in ("openai", "anthropic", "gemini")})
    served = serve_in_thread(create_app(config, manifest=manifest_with_scenarios(load_manifest())))
    deadline = time.monotonic() + SETTLE_S
    while httpx.get(f"{served.url}/readyz", timeout=30).status_code != 200:
        assert time.monotonic() < deadline, "the gateway did not get ready"
        time.sleep(0.05)
    yield served
    served.stop()


def hosted_run(provider: str, api: str, scenario: str, tenant: str,
               *hosted: dict[str, Any]) -> dict[str, Any]:
    return neutral(provider, api, f"sim:{scenario}", tenant=tenant, hosted_tools=list(hosted))


def sent_body(gateway: ServedApp, sim: SimulatorHandle, answer: dict[str, Any], api: str
              ) -> dict[str, Any]:
    """The body the simulator received for a run's call, once the call is over."""
    wait_run(gateway, answer["run_id"], call_over, "the call's end")
    [received] = sim.simulator.requests(api)
    assert received["status"] == 200 and "problems" not in received, received
    return received["body"]


@pytest.mark.parametrize(("tenant", "hosted", "rule"), [
    ("acme", {"type": "image_generation"}, "hosted.tools"),
    ("acme", {"type": "mcp", "server_label": "wiki", "server_url": "https://wiki.example/sse"},
     "hosted.mcp_servers"),
    ("nobody", {"type": "web_search"}, "hosted.tools"),  # a tenant the file does not name
    ("acme", {"type": "web_search", "allowed_domains": ["rust-lang.org"]},
     "hosted.allowed_domains"),
])
def test_a_forbidden_hosted_tool_is_422_and_nothing_reaches_the_provider(gateway, sim, tenant,
                                                                       hosted, rule):
    body = hosted_run("openai", "openai-responses", "openai-responses/text-with-usage", tenant,
                      hosted)
    answer = start_run(gateway, body, expect=422)
    assert answer["code"] == "egress_rejected" and answer["status"] == 422
    [candidate] = answer["candidates"]
    assert candidate["refused"][0]["rule"] == rule
    assert sim.simulator.requests() == []


def test_a_target_that_cannot_enforce_the_tenants_domains_is_422_with_nothing_sent(gateway, sim):
    body = hosted_run("google", "gemini-generate", "gemini-generate/text-stream", "acme",
                      {"type": "web_search"})
    answer = start_run(gateway, body, expect=422)
    assert answer["candidates"][0]["refused"][0]["rule"] == "domains"
    assert sim.simulator.requests() == []


def test_an_allowed_web_search_is_sent_with_the_tenants_domain_filters(gateway, sim):
    body = hosted_run("openai", "openai-responses", "openai-responses/text-with-usage", "acme",
                      {"type": "web_search", "allowed_domains": ["docs.python.org",
                                                                 "rust-lang.org"]})
    answer = start_run(gateway, body)
    assert answer["hosted_tools"] == [{"type": "web_search", "allowed_domains": [
        "docs.python.org"], "blocked_domains": []}]
    sent = sent_body(gateway, sim, answer, "openai-responses")
    # The request narrowed the tenant's list; what it asked beyond it is dropped.
    assert sent["tools"] == [{"type": "web_search",
                              "filters": {"allowed_domains": ["docs.python.org"]}}]


def test_claude_gets_the_tenants_blocked_domains(gateway, sim):
    body = hosted_run("anthropic", "anthropic-messages", "anthropic-messages/text", "shy",
                      {"type": "web_search", "blocked_domains": ["spam.example"]})
    answer = start_run(gateway, body)
    sent = sent_body(gateway, sim, answer, "anthropic-messages")
    assert sent["tools"] == [{"type": "web_search_20250305", "name": "web_search",
                              "blocked_domains": ["spam.example", "evil.example"]}]
