"""What the drop-in proxy keeps of a run besides its frames (issue #29): the tenant its token
says, the input packet on ``run-inputs`` redacted as the gateway redacts, one run for a
background response whose stream is cut and resumed with ``starting_after``, and a cancel
relayed to the provider. Real broker and worker, the gateway in a thread, the simulator."""

from __future__ import annotations

import secrets
import time

import httpx
import openai
import pytest

from tests.integration.gateway.proxy_clients import (
    RUN_ID_HEADER,
    Keeping,
    proxy_urls,
    wait_state,
)
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    gateway,
    offline,
    settings,
    sim,
    simulator,
    sse_events,
    start_gateway,
)

pytestmark = pytest.mark.kafka

CLIENT_KEY = "sk-client-" + secrets.token_hex(8)


def test_the_modelevents_token_travels_beside_the_provider_key_and_names_the_tenant(
        start_gateway, sim) -> None:
    token = "me-" + secrets.token_hex(8)
    gateway = start_gateway(api_tokens={"acme": [token]})
    anonymous = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                              max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="x-modelevents-token"):
        anonymous.chat.completions.create(model="gpt-4o", messages=[{"role": "user",
                                                                     "content": "hi"}])
    wrong = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                          max_retries=0, default_headers={"x-modelevents-token": token,
                                                          "x-modelevents-tenant": "other"})
    with pytest.raises(openai.PermissionDeniedError):
        wrong.chat.completions.create(model="gpt-4o", messages=[{"role": "user",
                                                                 "content": "hi"}])
    assert sim.simulator.requests("openai-chat") == []  # nothing reached the provider

    keeping = Keeping()
    client = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=0, default_headers={"x-modelevents-token": token},
                           http_client=keeping.client())
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user",
                                                              "content": "hi"}])
    run_id = keeping.exchanges[0].headers[RUN_ID_HEADER]
    as_acme = {"authorization": f"Bearer {token}"}
    # A run id the gateway made up is found once the worker wrote the run's state.
    deadline = time.monotonic() + 60
    while True:
        answer = httpx.get(f"{gateway.url}/v1/runs/{run_id}", headers=as_acme, timeout=30)
        if answer.status_code == 200 and answer.json()["state"] is not None:
            break
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.1)
    assert answer.json()["state"]["tenant"] == "acme"
    as_other = {"authorization": f"Bearer {token}x"}
    assert httpx.get(f"{gateway.url}/v1/runs/{run_id}", headers=as_other,
                     timeout=30).status_code == 401


def test_the_input_packet_is_written_redacted(gateway, sim) -> None:
    keeping = Keeping()
    client = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=0, http_client=keeping.client())
    client.responses.create(model="gpt-4o", input="mail the summary to ana@example.com")
    run_id = keeping.exchanges[0].headers[RUN_ID_HEADER]
    wait_state(gateway, run_id)
    messages = httpx.get(f"{gateway.url}/v1/runs/{run_id}/messages", timeout=30).json()
    packet = messages["input"]
    assert packet is not None, messages
    assert (packet["api"], packet["model"], packet["provider"]) == (
        "openai-responses", "gpt-4o", "openai")
    assert packet["redaction"]["redactions"] >= 1  # the e-mail address (default policy)


def test_a_cut_background_stream_resumed_with_starting_after_is_one_run(gateway, sim) -> None:
    keeping = Keeping()
    client = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=0, http_client=keeping.client())
    events = []
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for event in client.responses.create(model="sim:openai-responses/cut-after-5",
                                             input="hi", background=True, stream=True):
            events.append(event)
    assert events and len(events) <= 5
    response_id = events[0].response.id
    for event in client.responses.retrieve(response_id, stream=True,
                                           starting_after=events[-1].sequence_number):
        events.append(event)
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Hello, wörld 👋"
    run_ids = {e.headers[RUN_ID_HEADER] for e in keeping.exchanges}
    assert len(run_ids) == 1
    run_id = run_ids.pop()
    assert wait_state(gateway, run_id)["status"] == "completed"
    received = sse_events(gateway, run_id, follow="false")
    assert [kind for _, kind, _ in received] == [
        e.kind for e in offline("openai-responses/text-with-usage.sse", run_id)]


def test_a_background_response_is_cancelled_through_the_proxy(gateway, sim) -> None:
    keeping = Keeping()
    client = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=0, http_client=keeping.client())
    response = client.responses.create(model="sim:openai-responses/background-long",
                                       input="hi", background=True)
    cancelled = client.responses.cancel(response.id)
    while cancelled.status != "cancelled":
        cancelled = client.responses.retrieve(response.id)
    assert {r["path"] for r in sim.simulator.requests("openai-responses")} >= {
        f"/v1/responses/{response.id}/cancel"}
    run_ids = {e.headers[RUN_ID_HEADER] for e in keeping.exchanges}
    assert len(run_ids) == 1
    assert wait_state(gateway, run_ids.pop(), ("cancelled",))["status"] == "cancelled"


def test_a_run_id_of_another_tenant_is_refused_before_the_provider_is_called(
        start_gateway, sim) -> None:
    tokens = {"acme": "me-" + secrets.token_hex(8), "beta": "me-" + secrets.token_hex(8)}
    gateway = start_gateway(api_tokens={tenant: [token] for tenant, token in tokens.items()})
    run_id = f"run_taken_{secrets.token_hex(6)}"

    def client(tenant: str) -> openai.OpenAI:
        return openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                             max_retries=0, default_headers={
                                 "x-modelevents-token": tokens[tenant], RUN_ID_HEADER: run_id})

    client("acme").chat.completions.create(model="gpt-4o", messages=[{"role": "user",
                                                                      "content": "hi"}])
    as_acme = {"authorization": f"Bearer {tokens['acme']}"}
    # The claim is written in the background; the gateway's view of the owners reads it back.
    deadline = time.monotonic() + 30
    while httpx.get(f"{gateway.url}/v1/runs/{run_id}", headers=as_acme,
                    timeout=30).status_code != 200:
        assert time.monotonic() < deadline, "acme's run never became visible"
        time.sleep(0.05)
    sent = len(sim.simulator.requests("openai-chat"))
    with pytest.raises(openai.BadRequestError) as caught:
        client("beta").chat.completions.create(model="gpt-4o", messages=[{"role": "user",
                                                                          "content": "hi"}])
    assert caught.value.code == "run_id_taken"
    assert len(sim.simulator.requests("openai-chat")) == sent


def test_a_body_over_the_proxys_limit_is_refused_before_it_is_read(start_gateway, sim) -> None:
    gateway = start_gateway(proxy={"max_request_bytes": 1024})
    client = openai.OpenAI(base_url=proxy_urls(gateway)["openai"], api_key=CLIENT_KEY,
                           max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model="gpt-4o", input="x" * 2048)
    assert caught.value.status_code == 413
    assert "proxy.max_request_bytes" in caught.value.response.text
    assert sim.simulator.requests("openai-responses") == []

