"""The services read each provider API's facts (adapters/api_facts.py) and nothing else about it:
the gateway's follow-ups, webhooks and fetches, and the simulator, which serves the same paths
over real HTTP (a registered API the simulator or the gateway config does not know fails here,
naming it)."""

from __future__ import annotations

import httpx
import pytest

from modelevents.adapters.registry import API_FACTS, api_facts
from modelevents.services.gateway.calls.fetch import fetch_target
from modelevents.services.gateway.calls.handover import READ_BACK_APIS
from modelevents.services.gateway.calls.http import auth_headers
from modelevents.services.gateway.config import PROVIDERS, WEBHOOK_PROVIDERS, GatewayConfig
from modelevents.services.gateway.routes.webhooks import webhook_object
from modelevents.services.simulator import provider_http, provider_schemas
from modelevents.services.simulator.app import Simulator
from modelevents.services.simulator.assemble import complete_object, first_object
from modelevents.services.simulator.recordings import STREAM_APIS
from modelevents.services.simulator.scenarios import ScenarioRegistry
from modelevents.services.simulator.server import run_in_thread

FOLLOWED = [api for api, facts in API_FACTS.items() if facts.follow_up.get]


def test_every_api_is_known_to_the_gateway_config_and_the_simulator():
    for api, facts in API_FACTS.items():
        assert facts.config_provider in PROVIDERS, api
        assert facts.provider in provider_http.ENVELOPES, api
        assert complete_object(api, []) is None  # an assembler for a stream without an end
    assert set(STREAM_APIS) == set(provider_schemas.APIS) == set(API_FACTS)


def test_the_gateway_reads_back_the_objects_of_the_apis_that_offer_it():
    assert READ_BACK_APIS == {"openai-responses", "gemini-interactions"} == set(FOLLOWED)


def test_webhooks_are_accepted_for_the_providers_whose_apis_have_webhooks():
    assert set(WEBHOOK_PROVIDERS) == {facts.webhooks.provider for facts in API_FACTS.values()
                                      if facts.webhooks}


def test_a_gateway_config_finds_a_provider_by_its_events_name_too():
    config = GatewayConfig.model_validate(
        {"providers": {"gemini": {"base_url": "http://127.0.0.1:9"}}})
    assert config.provider(api_facts("gemini-interactions").provider) is config.provider("gemini")


@pytest.mark.parametrize(("api", "event_type", "fetched"), [
    ("openai-responses", "response.completed", True),
    ("openai-responses", "batch.completed", False),
    ("gemini-interactions", "interaction.requires_action", True),
    ("gemini-interactions", "batch.succeeded", False),
    ("anthropic-messages", "response.completed", False),
])
def test_the_gateway_fetches_the_objects_a_webhook_names_but_does_not_carry(api, event_type,
                                                                              fetched):
    assert fetch_target(api, event_type, "obj_1") is fetched
    assert fetch_target(api, event_type, None) is False


def test_the_gateway_reads_the_object_id_where_each_providers_webhooks_put_it():
    assert webhook_object("openai", {"type": "response.completed", "data": {"id": "resp_1"}}) \
        == ("response.completed", "resp_1")
    assert webhook_object("gemini", {"type": "interaction.completed",
                                     "data": {"interaction": {"id": "int_1"}}}) \
        == ("interaction.completed", "int_1")
    assert webhook_object("openai", {"type": "response.completed",
                                     "data": {"interaction": {"id": "int_1"}}}) \
        == ("response.completed", None)


def test_the_gateway_sends_each_key_as_its_api_takes_it_and_none_without_one():
    assert auth_headers("gemini-generate", "k") == {"x-goog-api-key": "k"}
    assert auth_headers("openai-chat", "k") == {"authorization": "Bearer k"}
    assert auth_headers("anthropic-messages", None) == {}


def test_the_simulator_announces_a_background_object_under_the_apis_stream_key():
    for api in API_FACTS:
        key = api_facts(api).stream_object_key
        frame = {"type": "created", (key or "message"): {"id": "obj_1", "status": "queued"}}
        assert first_object(api, [frame]) == ({"id": "obj_1", "status": "queued"} if key
                                              else None)


@pytest.fixture(scope="module")
def sim():
    handle = run_in_thread(Simulator(ScenarioRegistry.default(), validate=False).app)
    yield handle
    handle.stop()


@pytest.mark.parametrize("api", FOLLOWED)
def test_the_simulator_serves_the_follow_up_paths_the_gateway_calls(sim, api):
    follow_up = api_facts(api).follow_up
    with httpx.Client(base_url=sim.base_url, timeout=30) as client:
        read = client.get(follow_up.get.format(id="missing_1"))
        cancel = client.post(follow_up.cancel.format(id="missing_1"))
    for answer in (read, cancel):
        # The provider's own "no such object", not the web framework's "no such route".
        assert answer.status_code == 404
        assert "missing_1" in answer.json()["error"]["message"]
