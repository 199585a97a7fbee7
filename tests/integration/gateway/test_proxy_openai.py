"""The drop-in proxy with the official ``openai`` SDK (issue #29): pointed at
``/proxy/openai/v1`` it parses exactly what it parses from the provider (the simulator) directly —
Responses and Chat Completions, streamed and not, a background response retrieved — and each
run's events on Kafka are what ``normalize_bytes`` makes of the bytes the client got. Real
broker, real worker, the gateway in a thread, the simulator as the provider."""

from __future__ import annotations

import secrets
import time
from typing import Any

import openai
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
    sse_events,
    start_gateway,
)

pytestmark = pytest.mark.kafka

CLIENT_KEY = "sk-client-" + secrets.token_hex(8)
TOOLS = [{"type": "function", "name": "get_weather", "description": "weather in a city",
          "strict": False,
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}]


def clients(gateway, sim, **options: Any) -> tuple[openai.OpenAI, openai.OpenAI, Keeping]:
    """(direct to the simulator, through the proxy, the proxy client's exchanges)."""
    keeping = Keeping()
    direct = openai.OpenAI(base_url=sim.urls()["openai"], api_key=CLIENT_KEY, max_retries=0,
                           **options)
    proxied = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                            max_retries=0, http_client=keeping.client(), **options)
    return direct, proxied, keeping


def responses_stream(client: openai.OpenAI) -> dict[str, Any]:
    events = list(client.responses.create(
        model="sim:openai-responses/tool-call-parallel", input="weather in Paris and Rome?",
        tools=TOOLS, stream=True))
    final = events[-1].response
    return {"types": [e.type for e in events],
            "sequence": [e.sequence_number for e in events],
            "typed": all(type(e).__name__.startswith("Response") for e in events),
            "id": final.id, "status": final.status,
            "calls": [(i.name, i.arguments, i.call_id) for i in final.output
                      if i.type == "function_call"],
            "usage": final.usage.model_dump() if final.usage else None}


def test_responses_stream_with_tool_calls_parses_as_from_the_provider(gateway, sim) -> None:
    direct, proxied, keeping = clients(gateway, sim)
    through = responses_stream(proxied)
    assert through == responses_stream(direct)
    assert len(through["calls"]) == 2 and through["typed"]
    [exchange] = keeping.exchanges
    run_id = exchange.headers[RUN_ID_HEADER]
    kinds = assert_run_is_normalized_bytes(gateway, run_id, exchange.body)
    assert kinds.count("tool.call") == 2
    # The SDK's own headers reach the provider; the proxy's do not.
    proxied_call = sim.simulator.requests("openai-responses")[0]
    assert proxied_call["headers"]["x-stainless-lang"] == "python"
    assert not any(name.startswith("x-modelevents-") for name in proxied_call["headers"])


def test_responses_without_streaming_parses_as_from_the_provider(gateway, sim) -> None:
    direct, proxied, keeping = clients(gateway, sim)

    def create(client: openai.OpenAI) -> tuple[Any, ...]:
        response = client.responses.create(model="sim:openai-responses/text-with-usage",
                                           input="hi")
        return response.id, response.status, response.output_text, response.usage.model_dump()

    assert create(proxied) == create(direct)
    [exchange] = keeping.exchanges
    assert exchange.headers["x-request-id"]  # the provider's headers reach the client
    assert_run_is_normalized_bytes(gateway, exchange.headers[RUN_ID_HEADER], exchange.body)


def test_a_background_response_is_retrieved_through_the_proxy_into_one_run(gateway, sim
                                                                            ) -> None:
    direct, proxied, keeping = clients(gateway, sim)

    def background(client: openai.OpenAI) -> list[tuple[str, str]]:
        response = client.responses.create(model="sim:openai-responses/background-8-polls",
                                           input="hi", background=True)
        seen = [(response.status, response.output_text)]
        while response.status in ("queued", "in_progress"):
            response = client.responses.retrieve(response.id)
            seen.append((response.status, response.output_text))
        return seen

    through = background(proxied)
    sim.simulator.reset()
    assert through == background(direct)
    assert through[-1] == ("completed", "Hello, wörld 👋")
    run_ids = {e.headers[RUN_ID_HEADER] for e in keeping.exchanges}
    assert len(run_ids) == 1, "the retrieves belong to the run of the create call"
    state = wait_state(gateway, run_ids.pop(), ("completed",))
    assert state["usage"]["output_tokens"] > 0


def chat(client: openai.OpenAI, stream: bool) -> dict[str, Any]:
    asked = dict(model="sim:openai-chat/reasoning-then-text",
                 messages=[{"role": "user", "content": "capital?"}])
    if not stream:
        completion = client.chat.completions.create(**asked)
        return {"id": completion.id, "text": completion.choices[0].message.content,
                "finish": completion.choices[0].finish_reason,
                "usage": completion.usage.model_dump() if completion.usage else None}
    chunks = list(client.chat.completions.create(**asked, stream=True,
                                                 stream_options={"include_usage": True}))
    return {"ids": sorted({c.id for c in chunks}),
            "text": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
            "finish": [c.choices[0].finish_reason for c in chunks if c.choices],
            "usage": [c.usage.model_dump() for c in chunks if c.usage]}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "object"])
def test_chat_completions_parse_as_from_the_provider(gateway, sim, stream) -> None:
    direct, proxied, keeping = clients(gateway, sim)
    through = chat(proxied, stream)
    assert through == chat(direct, stream)
    assert through["text"]
    [exchange] = keeping.exchanges
    assert_run_is_normalized_bytes(gateway, exchange.headers[RUN_ID_HEADER], exchange.body)


def test_a_named_compatible_upstream_is_reached_by_its_name(start_gateway, sim) -> None:
    gateway = start_gateway(proxy={"upstreams": {"vllm": {"base_url": sim.base_url + "/v1",
                                                          "provider": "vllm"}}})
    keeping = Keeping()
    client = openai.OpenAI(base_url=proxy_urls(gateway, "vllm")["openai"], api_key="none",
                           max_retries=0, http_client=keeping.client())
    assert chat(client, True)["text"]
    [exchange] = keeping.exchanges
    run_id = exchange.headers[RUN_ID_HEADER]
    wait_state(gateway, run_id)
    events = sse_events(gateway, run_id, follow="false")
    assert events and {data["provider"] for _, _, data in events} == {"vllm"}


def test_a_429_with_retry_after_is_retried_by_the_sdk_as_against_the_provider(
        gateway, sim, request) -> None:
    session = {"x-simulator-session": f"{request.node.name}-{time.monotonic_ns()}"}
    keeping = Keeping()
    client = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=2, default_headers=session, http_client=keeping.client())
    response = client.responses.create(model="sim:openai-responses/rate-limited-once",
                                       input="hi")
    assert response.output_text == "Hello, wörld 👋"
    attempts = sim.simulator.requests("openai-responses")
    assert [(r["status"], r["attempt"]) for r in attempts] == [(429, 1), (200, 2)]
    refused, served = keeping.exchanges
    assert refused.status == 429 and refused.headers["retry-after-ms"] == "20"
    assert served.status == 200
    # Each HTTP call its own run: the refused one failed, as the provider said.
    assert wait_state(gateway, refused.headers[RUN_ID_HEADER])["status"] == "failed"
    assert_run_is_normalized_bytes(gateway, served.headers[RUN_ID_HEADER], served.body)

    strict = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=0,
                           default_headers={**session, "x-simulator-fail": "429:1",
                                            "x-simulator-session": session[
                                                "x-simulator-session"] + "-strict"})
    with pytest.raises(openai.RateLimitError) as caught:
        strict.responses.create(model="gpt-4o", input="hi")
    assert caught.value.response.headers["retry-after-ms"] == "20"


def test_the_capability_router_refuses_with_the_sdks_usual_exception(gateway, sim) -> None:
    client = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="gpt-4o-search-preview", messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    assert "tools" in caught.value.message and caught.value.code == "capability_rejected"
    assert sim.simulator.requests("openai-chat") == []  # nothing was sent


def test_the_run_id_header_names_the_run(gateway, sim) -> None:
    run_id = f"run_proxy_{secrets.token_hex(6)}"
    keeping = Keeping()
    http = keeping.client()
    response = http.post(f"{proxy_urls(gateway)['openai']}/chat/completions",
                         json={"model": "sim:openai-chat/text",
                               "messages": [{"role": "user", "content": "hi"}]},
                         headers={RUN_ID_HEADER: run_id})
    assert response.status_code == 200, response.text
    assert response.headers[RUN_ID_HEADER] == run_id
    assert_run_is_normalized_bytes(gateway, run_id, keeping.exchanges[0].body)
