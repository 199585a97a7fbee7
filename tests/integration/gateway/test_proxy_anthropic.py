"""The drop-in proxy with the official ``anthropic`` SDK (issue #29): pointed at
``/proxy/anthropic`` it parses exactly what it parses from the provider (the simulator) directly
— ``messages.stream`` with tools, ``messages.create`` — an overloaded answer is retried by the
SDK as against the provider, the router refuses in Claude's error shape, and each run's events
on Kafka are what ``normalize_bytes`` makes of the bytes the client got."""

from __future__ import annotations

import secrets
import time
from typing import Any

import anthropic
import httpx2
import pytest

from tests.integration.gateway.proxy_clients import (
    RUN_ID_HEADER,
    Keeping,
    assert_run_is_normalized_bytes,
    proxy_urls,
    wait_state,
)
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    gateway,
    settings,
    sim,
    simulator,
    start_gateway,
)

pytestmark = pytest.mark.kafka

CLIENT_KEY = "sk-ant-client-" + secrets.token_hex(8)
TOOLS = [{"name": "read_notes", "description": "the user's notes",
          "input_schema": {"type": "object", "properties": {"topic": {"type": "string"}}}}]
ASKED = {"max_tokens": 256, "messages": [{"role": "user", "content": "my notes?"}]}


def clients(gateway, sim, **options: Any) -> tuple[anthropic.Anthropic, anthropic.Anthropic,
                                                    Keeping]:
    keeping = Keeping()
    direct = anthropic.Anthropic(base_url=sim.urls()["anthropic"], api_key=CLIENT_KEY,
                                 max_retries=0, **options)
    proxied = anthropic.Anthropic(base_url=proxy_urls(gateway)["anthropic"], api_key=CLIENT_KEY,
                                  max_retries=0, http_client=keeping.client(httpx2), **options)
    return direct, proxied, keeping


def parsed(message: Any) -> dict[str, Any]:
    return {"id": message.id, "model": message.model, "stop": message.stop_reason,
            "content": [block.model_dump() for block in message.content],
            "usage": message.usage.model_dump()}


def test_messages_stream_with_tools_parses_as_from_the_provider(gateway, sim) -> None:
    direct, proxied, keeping = clients(gateway, sim)

    def stream(client: anthropic.Anthropic) -> dict[str, Any]:
        with client.messages.stream(model="sim:anthropic-messages/tool-loop", tools=TOOLS,
                                    **ASKED) as events:
            kinds = [event.type for event in events]
            return {"kinds": kinds, **parsed(events.get_final_message())}

    through = stream(proxied)
    assert through == stream(direct)
    assert through["stop"] == "tool_use"
    [tool_use] = [block for block in through["content"] if block["type"] == "tool_use"]
    assert tool_use["name"] and isinstance(tool_use["input"], dict)
    [exchange] = keeping.exchanges
    kinds = assert_run_is_normalized_bytes(gateway, exchange.headers[RUN_ID_HEADER],
                                           exchange.body)
    assert "tool.call" in kinds
    assert wait_state(gateway, exchange.headers[RUN_ID_HEADER])["status"] == "waiting_for_tool"


def test_messages_create_parses_as_from_the_provider(gateway, sim) -> None:
    direct, proxied, keeping = clients(gateway, sim)

    def create(client: anthropic.Anthropic) -> dict[str, Any]:
        return parsed(client.messages.create(model="claude-sonnet-4-5", **ASKED))

    through = create(proxied)
    assert through == create(direct)
    assert through["content"][0]["text"] == "The capital of France is Paris."
    [exchange] = keeping.exchanges
    assert exchange.headers["request-id"]  # the provider's headers reach the client
    assert_run_is_normalized_bytes(gateway, exchange.headers[RUN_ID_HEADER], exchange.body)


def test_an_overloaded_answer_is_retried_by_the_sdk(gateway, sim, request) -> None:
    session = {"x-simulator-session": f"{request.node.name}-{time.monotonic_ns()}"}
    keeping = Keeping()
    client = anthropic.Anthropic(base_url=proxy_urls(gateway)["anthropic"], api_key=CLIENT_KEY,
                                 max_retries=2, default_headers=session,
                                 http_client=keeping.client(httpx2))
    message = client.messages.create(model="sim:anthropic-messages/overloaded-once", **ASKED)
    assert message.content[0].text == "The capital of France is Paris."
    assert [(r["status"], r["attempt"]) for r in sim.simulator.requests(
        "anthropic-messages")] == [(529, 1), (200, 2)]
    assert [e.status for e in keeping.exchanges] == [529, 200]


def test_the_capability_router_refuses_in_claudes_error_shape(gateway, sim) -> None:
    client = anthropic.Anthropic(base_url=proxy_urls(gateway)["anthropic"], api_key=CLIENT_KEY,
                                 max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(model="claude-sonnet-4-5", tools=[
            {"type": "computer_20250124", "name": "computer", "display_width_px": 800,
             "display_height_px": 600}], **ASKED)
    assert caught.value.body["type"] == "error"
    assert "hosted_tools.computer" in caught.value.body["error"]["message"]
    assert sim.simulator.requests("anthropic-messages") == []
