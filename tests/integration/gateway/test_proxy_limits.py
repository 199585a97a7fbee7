"""Each tenant's limits on the drop-in proxy and POST /v1/runs (``proxy.tenants``, issue #29),
with the official ``openai`` SDK: a burst over requests_per_minute is refused 429 and raised (or retried, after the
Retry-After the gateway computed) as RateLimitError, calls over max_in_flight likewise, and a
tenant whose runs' usage — as the worker's run states on ``runs`` say — adds up past its
tokens_per_day is refused before the provider is called. Real broker, real worker, the gateway
in a thread, the simulator as the provider: what the simulator received is what was let
through."""

from __future__ import annotations

import secrets
import time
from typing import Any

import httpx
import openai
import pytest

from modelevents.services.gateway.upstreams import ProxyConfig
from tests.integration.gateway.proxy_clients import RUN_ID_HEADER, proxy_urls, wait_state
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    neutral,
    settings,
    settled,
    sim,
    simulator,
    start_gateway,
    wait_run,
)

pytestmark = pytest.mark.kafka

CLIENT_KEY = "sk-client-" + secrets.token_hex(8)
CHAT = dict(model="sim:openai-chat/reasoning-then-text",
            messages=[{"role": "user", "content": "capital?"}])
USAGE_MODEL = "sim:openai-responses/text-with-usage"


def proxied(gateway, tenant: str, max_retries: int = 0) -> tuple[openai.OpenAI, list[int]]:
    """An SDK client of ``tenant`` through the proxy, and the status of every answer it got."""
    statuses: list[int] = []
    http = httpx.Client(timeout=60, event_hooks={
        "response": [lambda response: statuses.append(response.status_code)]})
    client = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=max_retries, http_client=http,
                           default_headers={"x-modelevents-tenant": tenant})
    return client, statuses


def chats_received(sim) -> int:
    return len(sim.simulator.requests("openai-chat"))


def limited(**tenants: dict[str, Any]) -> dict[str, Any]:
    return {"proxy": ProxyConfig(tenants=tenants)}


def test_a_burst_over_requests_per_minute_raises_rate_limit_error(start_gateway, sim) -> None:
    gateway = start_gateway(**limited(acme={"requests_per_minute": 3}))
    client, _ = proxied(gateway, "acme")
    served, refused = 0, []
    for _ in range(7):
        try:
            assert client.chat.completions.create(**CHAT).choices[0].message.content
            served += 1
        except openai.RateLimitError as exc:
            refused.append(exc)
    assert (served, len(refused)) == (3, 4)
    assert chats_received(sim) == 3, "the refused calls never reached the provider"
    error = refused[0]
    assert error.code == "rate_limited" and "requests_per_minute" in error.message
    # 3 a minute: the next token comes in about 20 s, and the answer says so.
    assert 15 <= int(error.response.headers["retry-after"]) <= 20
    assert error.response.headers["x-modelevents-error"] == "rate_limited"
    # Another tenant has a bucket of its own (no entry, no default: no limit).
    other, _ = proxied(gateway, "globex")
    other.chat.completions.create(**CHAT)
    assert chats_received(sim) == 4


def test_the_sdk_retries_after_the_retry_after_and_is_served(start_gateway, sim) -> None:
    # 120 a minute with a burst of one: a token every half second.
    gateway = start_gateway(**limited(acme={"requests_per_minute": 120, "burst": 1}))
    eager, _ = proxied(gateway, "acme")
    eager.chat.completions.create(**CHAT)
    with pytest.raises(openai.RateLimitError):
        eager.chat.completions.create(**CHAT)
    patient, statuses = proxied(gateway, "acme", max_retries=3)
    patient.chat.completions.create(**CHAT)  # refused first, served once the bucket refilled
    assert statuses[0] == 429 and statuses[-1] == 200
    assert chats_received(sim) == 2


def test_calls_over_max_in_flight_are_refused_until_one_ends(start_gateway, sim) -> None:
    gateway = start_gateway(**limited(default={"max_in_flight": 1}))
    client, _ = proxied(gateway, "acme")
    # 300 ms before each frame: the first call is in flight while its stream is read.
    stream = client.chat.completions.create(**CHAT, stream=True,
                                            extra_headers={"x-simulator-delay-ms": "300"})
    chunks = iter(stream)
    next(chunks)
    with pytest.raises(openai.RateLimitError) as refused:
        client.chat.completions.create(**CHAT)
    assert refused.value.code == "rate_limited" and "max_in_flight" in refused.value.message
    assert refused.value.response.headers["retry-after"] == "1"
    list(chunks)  # the first call ends
    deadline = time.monotonic() + 10
    while True:  # its slot is freed once the gateway has relayed its last byte
        try:
            client.chat.completions.create(**CHAT)
            break
        except openai.RateLimitError:
            assert time.monotonic() < deadline, "the ended call still holds its slot"
            time.sleep(0.05)
    assert chats_received(sim) >= 2


def tokens_today(gateway) -> dict[str, float]:
    text = httpx.get(f"{gateway.url}/metrics", timeout=30).text
    prefix = 'modelevents_gateway_tenant_tokens_today{tenant="'
    return {line[len(prefix):].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith(prefix)}


def test_a_tenant_over_its_tokens_per_day_is_refused_before_the_provider(start_gateway, sim
                                                                          ) -> None:
    direct = openai.OpenAI(base_url=sim.urls()["openai"], api_key=CLIENT_KEY, max_retries=0)
    one_call = direct.responses.create(model=USAGE_MODEL, input="hi").usage.total_tokens
    assert one_call > 0
    # Two calls' usage is over the budget, one call's is not.
    budget = one_call * 3 // 2
    # A tenant of its own: the module's runs of acme count today as well.
    gateway = start_gateway(**limited(initech={"tokens_per_day": budget}))
    client, _ = proxied(gateway, "initech", max_retries=0)
    used = 0
    for _ in range(2):
        response = client.responses.with_raw_response.create(model=USAGE_MODEL, input="hi")
        state = wait_state(gateway, response.headers[RUN_ID_HEADER], ("completed",))
        used += state["usage"]["total_tokens"]
    assert used == 2 * one_call > budget
    # The runs' GET reads the same view of runs the budget sums: both runs are counted.
    assert tokens_today(gateway)["initech"] == used
    received = len(sim.simulator.requests("openai-responses"))
    with pytest.raises(openai.RateLimitError) as refused:
        client.responses.create(model=USAGE_MODEL, input="hi")
    error = refused.value
    assert error.code == "budget_exhausted"
    assert f"tokens_per_day budget is {budget}" in error.message
    assert f"used {used} tokens" in error.message and "T00:00:00Z" in error.message
    assert 0 < int(error.response.headers["retry-after"]) <= 86_400
    assert len(sim.simulator.requests("openai-responses")) == received, "nothing sent upstream"
    # Another tenant's budget is its own; the budgets configured are a gauge too.
    globex, _ = proxied(gateway, "globex")
    globex.responses.create(model=USAGE_MODEL, input="hi")
    # The gateway's own runs of the tenant are refused alike, as a problem.
    problem = httpx.post(f"{gateway.url}/v1/runs", timeout=30, json=neutral(
        "openai", "openai-responses", USAGE_MODEL, tenant="initech"))
    assert problem.status_code == 429 and problem.json()["code"] == "budget_exhausted"
    assert f'modelevents_gateway_tenant_tokens_per_day{{tenant="initech"}} {float(budget)}' \
        in httpx.get(f"{gateway.url}/metrics", timeout=30).text


def test_post_v1_runs_answers_the_same_limits_as_problems(start_gateway, sim) -> None:
    gateway = start_gateway(**limited(acme={"requests_per_minute": 1},
                                      globex={"max_in_flight": 1}))

    def start(tenant: str) -> httpx.Response:
        return httpx.post(f"{gateway.url}/v1/runs", timeout=30, json=neutral(
            "openai", "openai-responses", USAGE_MODEL, tenant=tenant))

    assert start("acme").status_code == 202
    refused = start("acme")
    assert refused.status_code == 429
    problem = refused.json()
    assert problem["code"] == "rate_limited" and "requests_per_minute" in problem["detail"]
    assert 50 <= int(refused.headers["retry-after"]) <= 60
    # A run's call holds its tenant's slot until it ends, then the next is let through.
    first = start("globex")
    assert first.status_code == 202, first.text
    wait_run(gateway, first.json()["run_id"], settled("completed"), "the run's end")
    deadline = time.monotonic() + 10
    while (second := start("globex")).status_code == 429:  # the call's task ending after
        assert time.monotonic() < deadline, "the ended call still holds its slot"  # its state
        time.sleep(0.05)
    assert second.status_code == 202, second.text
    wait_run(gateway, second.json()["run_id"], settled("completed"), "the run's end")
    assert len(sim.simulator.requests("openai-responses")) == 3
