"""The drop-in proxy when Kafka does not take its frames (issue #29): the client is still served
and what was not written is logged with its runs, never dropped silently; a ``fail_closed``
tenant is answered 503 in the provider's error shape before the provider is called. Kafka
"away" here is a real broker without the gateway's topics (it creates none by itself), so every
write of the tee fails as an outage's would."""

from __future__ import annotations

import logging
import time

import openai
import pytest

from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.config import GatewayConfig, ProviderConfig
from modelevents.services.local.asgi_thread import serve_in_thread
from tests.integration.conftest import unique_settings
from tests.integration.gateway.proxy_clients import proxy_urls
from tests.integration.simulated_gateway import OPENAI_KEY, sim, simulator  # noqa: F401

pytestmark = pytest.mark.kafka

ASKED = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def test_a_fail_closed_tenant_is_refused_while_kafka_takes_nothing(kafka_broker, sim, caplog
                                                                   ) -> None:
    settings = unique_settings(kafka_broker)  # its topics are never created
    config = GatewayConfig(kafka=settings, ack_timeout_s=1.0, proxy={"fail_closed": ["acme"]},
                           providers={"openai": ProviderConfig(base_url=sim.base_url,
                                                               api_key=OPENAI_KEY)})
    caplog.set_level(logging.ERROR, logger="modelevents.gateway.proxy")
    with serve_in_thread(create_app(config), name="gateway") as gateway:
        base_url = proxy_urls(gateway)["openai"]
        served = openai.OpenAI(base_url=base_url, api_key="sk-client", max_retries=0)
        acme = openai.OpenAI(base_url=base_url, api_key="sk-client", max_retries=0,
                             default_headers={"x-modelevents-tenant": "acme"})
        # Kafka looks reachable until a write says otherwise: acme is served at first.
        assert acme.chat.completions.create(**ASKED).choices[0].message.content
        assert served.chat.completions.create(**ASKED).choices[0].message.content
        deadline = time.monotonic() + 30
        while True:
            before = len(sim.simulator.requests("openai-chat"))
            try:
                acme.chat.completions.create(**ASKED)
            except openai.InternalServerError as exc:
                refused = exc
                break
            assert time.monotonic() < deadline, "acme was never refused"
            time.sleep(0.2)
        assert refused.status_code == 503
        assert refused.response.headers["retry-after"] == "1"
        assert refused.body["code"] == "kafka_unavailable"  # OpenAI's error shape
        assert len(sim.simulator.requests("openai-chat")) == before  # nothing was sent
        # Tenants that do not fail closed are still served.
        assert served.chat.completions.create(**ASKED).choices[0].message.content
    lost = [r.getMessage() for r in caplog.records if "not written to Kafka" in r.getMessage()]
    assert lost and "run_" in lost[0]
