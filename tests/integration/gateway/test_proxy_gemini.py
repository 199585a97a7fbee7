"""The drop-in proxy with the official ``google-genai`` SDK (issue #29): pointed at
``/proxy/gemini`` it parses exactly what it parses from the provider (the simulator) directly —
``generate_content_stream`` (SSE), ``generate_content``, Interactions streamed and a background
interaction got to its end — the JSON-array form of ``streamGenerateContent`` arrives
unchanged, the router refuses in Google's error shape, and each run's events on Kafka are what
``normalize_bytes`` makes of the bytes the client got."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from google import genai
from google.genai import errors as genai_errors

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

CLIENT_KEY = "AIza-client-key"


def clients(gateway, sim) -> tuple[genai.Client, genai.Client, Keeping]:
    keeping = Keeping()
    direct = genai.Client(api_key=CLIENT_KEY,
                          http_options={"base_url": sim.urls()["google-genai"]})
    proxied = genai.Client(api_key=CLIENT_KEY, http_options={
        "base_url": proxy_urls(gateway)["google-genai"], "httpx_client": keeping.client()})
    return direct, proxied, keeping


def test_generate_content_stream_parses_as_from_the_provider(gateway, sim) -> None:
    direct, proxied, keeping = clients(gateway, sim)

    def stream(client: genai.Client) -> dict[str, Any]:
        chunks = list(client.models.generate_content_stream(
            model="sim:gemini-generate/tool-call-streamed-args", contents="weather?"))
        return {"text": [c.text for c in chunks],
                "calls": [(f.name, f.args) for c in chunks for f in c.function_calls or ()],
                "finish": [c.candidates[0].finish_reason for c in chunks if c.candidates],
                "usage": [c.usage_metadata.model_dump() if c.usage_metadata else None
                          for c in chunks],
                "ids": [c.response_id for c in chunks]}

    through = stream(proxied)
    assert through == stream(direct)
    [exchange] = keeping.exchanges
    assert exchange.headers["content-type"].startswith("text/event-stream")
    assert_run_is_normalized_bytes(gateway, exchange.headers[RUN_ID_HEADER], exchange.body)


def test_generate_content_parses_as_from_the_provider(gateway, sim) -> None:
    direct, proxied, keeping = clients(gateway, sim)

    def create(client: genai.Client) -> tuple[Any, ...]:
        response = client.models.generate_content(model="gemini-2.5-flash", contents="hi")
        return response.text, response.response_id, response.usage_metadata.model_dump()

    through = create(proxied)
    assert through == create(direct)
    assert through[0] == "Hello, wörld!"
    [exchange] = keeping.exchanges
    assert_run_is_normalized_bytes(gateway, exchange.headers[RUN_ID_HEADER], exchange.body)


def test_the_json_array_stream_arrives_unchanged_and_is_teed_element_by_element(gateway, sim
                                                                                ) -> None:
    path = "/v1beta/models/sim:gemini-generate/tool-call-parallel:streamGenerateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "weather?"}]}]}
    headers = {"x-goog-api-key": CLIENT_KEY, "x-simulator-chunk-seed": "7"}
    direct = httpx.post(sim.base_url + path, json=body, headers=headers, timeout=30)
    through = httpx.post(proxy_urls(gateway)["google-genai"] + path, json=body, headers=headers,
                         timeout=30)
    assert through.status_code == direct.status_code == 200
    assert through.content == direct.content and through.content.startswith(b"[")
    kinds = assert_run_is_normalized_bytes(gateway, through.headers[RUN_ID_HEADER],
                                           through.content)
    assert kinds.count("tool.call") == through.content.count(b'"functionCall"') > 0


def test_interactions_stream_parses_as_from_the_provider(gateway, sim) -> None:
    direct, proxied, keeping = clients(gateway, sim)

    def stream(client: genai.Client) -> list[Any]:
        return [event.model_dump() for event in client.interactions.create(
            model="gemini-3-flash-preview", input="weather?", stream=True)]

    through = stream(proxied)
    assert through == stream(direct)
    assert through[-1]["event_type"] == "interaction.completed"
    [exchange] = keeping.exchanges
    assert_run_is_normalized_bytes(gateway, exchange.headers[RUN_ID_HEADER], exchange.body)


def test_a_background_interaction_is_got_to_its_end_in_one_run(gateway, sim) -> None:
    direct, proxied, keeping = clients(gateway, sim)

    def background(client: genai.Client) -> list[tuple[Any, ...]]:
        interaction = client.interactions.create(
            model="sim:gemini-interactions/background-8-polls", input="weather?",
            background=True)
        seen = [(interaction.id, interaction.status)]
        while interaction.status == "in_progress":
            interaction = client.interactions.get(interaction.id)
            seen.append((interaction.id, interaction.status))
        return seen

    through = background(proxied)
    sim.simulator.reset()
    assert through == background(direct)
    assert through[-1][1] == "completed"
    run_ids = {e.headers[RUN_ID_HEADER] for e in keeping.exchanges}
    assert len(run_ids) == 1, "the gets belong to the run of the create call"
    assert wait_state(gateway, run_ids.pop(), ("completed",))["status"] == "completed"


def test_the_capability_router_refuses_in_googles_error_shape(gateway, sim) -> None:
    _, proxied, _ = clients(gateway, sim)
    with pytest.raises(genai_errors.ClientError) as caught:
        proxied.models.generate_content(
            model="gemini-2.5-flash", contents="what is here?",
            config={"tools": [{"computer_use": {"environment": "ENVIRONMENT_BROWSER"}}]})
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"
    assert sim.simulator.requests("gemini-generate") == []


def test_a_background_interaction_is_cancelled_through_the_proxy(gateway, sim) -> None:
    _, proxied, keeping = clients(gateway, sim)
    interaction = proxied.interactions.create(
        model="sim:gemini-interactions/background-8-polls", input="weather?", background=True)
    proxied.interactions.cancel(interaction.id)
    while interaction.status not in ("cancelled", "completed"):
        interaction = proxied.interactions.get(interaction.id)
    assert interaction.status == "cancelled"
    assert any(r["path"].endswith(f"{interaction.id}/cancel")
               for r in sim.simulator.requests("gemini-interactions"))
    run_ids = {e.headers[RUN_ID_HEADER] for e in keeping.exchanges}
    assert len(run_ids) == 1
    assert wait_state(gateway, run_ids.pop(), ("cancelled",))["status"] == "cancelled"
