"""Nothing lost when Kafka is away, through the drop-in proxy (issue #29): the official ``openai``
SDK streams a response through ``/proxy/openai/v1`` while the broker is stopped mid-stream.

The client gets every byte the provider sent and its calls end normally, a second call during
the outage is served, a ``fail_closed`` tenant is refused (503 ``kafka_unavailable``, the
provider never called); once the broker is back the gateway's journal drains and each run's
events are exactly what ``normalize_bytes`` makes of the bytes the client got, nothing lost and
nothing twice. The module has a broker of its own (it stops and restarts it), a real worker, the
gateway in a thread, the simulator as the provider, pacing the stream so it outlasts the stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelevents.services.gateway.config import JournalConfig
from modelevents.services.local import kafka_broker as local_kafka
from modelevents.services.local.asgi_thread import ServedApp
from tests.integration.conftest import restartable_broker
from tests.integration.gateway.proxy_clients import (
    RUN_ID_HEADER,
    Exchange,
    Keeping,
    assert_run_is_normalized_bytes,
    proxy_urls,
)
from tests.integration.gateway.test_proxy_openai import CLIENT_KEY, TOOLS
from tests.integration.pipeline import HANG_GUARD_S
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    settings,
    sim,
    simulator,
    start_gateway,
)

pytestmark = pytest.mark.kafka

STRICT = "strict"  # the tenant in proxy.fail_closed
SPOOLED = "modelevents_gateway_frames_spooled_total"
DRAINED = "modelevents_gateway_frames_drained_total"
HELD = "modelevents_gateway_journal_frames"
# The simulator waits this long before each of the stream's 13 frames: the stream outlasts the
# broker's stop (seconds) even on a loaded machine, so its last frames meet a stopped broker.
PACE_MS = 2500
READ_BEFORE_STOP = 2  # events the client reads before the broker is stopped
RESPONSE = dict(model="sim:openai-responses/tool-call-parallel",
                input="weather in Paris and Rome?", tools=TOOLS, stream=True)
CHAT = dict(model="sim:openai-chat/reasoning-then-text",
            messages=[{"role": "user", "content": "capital?"}], stream=True,
            stream_options={"include_usage": True})

broker_settings, kafka_broker = restartable_broker(base_port=19100)


def metric(gateway: ServedApp, name: str) -> float:
    """The sum of a sample's values on the gateway's ``GET /metrics`` (0 when absent)."""
    answer = httpx.get(f"{gateway.url}/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    return sum(sample.value for family in text_string_to_metric_families(answer.text)
               for sample in family.samples if sample.name == name)


def until(holds: Callable[[], bool], what: str) -> None:
    """Wait until ``holds()`` (a guard against a hang: past HANG_GUARD_S the test fails)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not holds():
        assert time.monotonic() < deadline, f"not within {HANG_GUARD_S:g} s: {what}"
        time.sleep(0.2)


def client(base_url: str, keeping: Keeping, tenant: str | None = None) -> openai.OpenAI:
    headers = {"x-modelevents-tenant": tenant} if tenant else {}
    return openai.OpenAI(base_url=base_url, api_key=CLIENT_KEY, max_retries=0,
                         timeout=HANG_GUARD_S, http_client=keeping.client(),
                         default_headers=headers)


def dumped(events: list[Any]) -> list[dict[str, Any]]:
    """Each event or chunk as the SDK typed it: its type's name and its fields."""
    return [{"type": type(event).__name__, **event.model_dump()} for event in events]


def only(keeping: Keeping) -> Exchange:
    [exchange] = keeping.exchanges
    assert exchange.status == 200, exchange.body[:500]
    return exchange


@pytest.fixture
def broker_back(broker_settings: local_kafka.LocalBrokerSettings
                ) -> Iterator[local_kafka.LocalBrokerSettings]:
    """The module's broker, running again after the test whatever happened in it."""
    yield broker_settings
    if not local_kafka.status(broker_settings).running:
        local_kafka.start(broker_settings)


def test_broker_stopped_mid_stream_the_client_gets_everything_and_kafka_gets_it_later(
        broker_back, start_gateway, sim, tmp_path: Path) -> None:
    gateway = start_gateway(journal=JournalConfig(directory=tmp_path / "journal", deadline_s=0.5),
                            proxy={"fail_closed": [STRICT]})
    # The provider's streams read directly: what the client must get through the proxy too.
    direct_keeping = Keeping()
    direct = client(sim.urls()["openai"], direct_keeping)
    expected_response = dumped(list(direct.responses.create(**RESPONSE)))
    expected_chat = dumped(list(direct.chat.completions.create(**CHAT)))
    response_bytes, chat_bytes = (exchange.body for exchange in direct_keeping.exchanges)
    before_calls = len(sim.simulator.requests("openai-responses"))

    base_url = proxy_urls(gateway)["openai"]
    paced_keeping, chat_keeping, strict_keeping = Keeping(), Keeping(), Keeping()
    paced = client(base_url, paced_keeping)
    stream = paced.responses.create(**RESPONSE,
                                    extra_headers={"x-simulator-delay-ms": str(PACE_MS)})
    received = [next(stream) for _ in range(READ_BEFORE_STOP)]
    local_kafka.stop(broker_back)
    assert not local_kafka.status(broker_back).running
    # 1. The rest of the stream while Kafka is away: every event, the call ends normally.
    received += list(stream)
    assert len(sim.simulator.requests("openai-responses")) == before_calls + 1
    assert dumped(received) == expected_response
    assert received[-1].type == "response.completed"
    assert only(paced_keeping).body == response_bytes, "the bytes the provider sent, unchanged"
    assert metric(gateway, SPOOLED) > 0, (
        f"the stream ({PACE_MS} ms a frame) ended before the broker stopped: no frame spooled")
    assert not local_kafka.status(broker_back).running

    # 2. A call made while Kafka is away is served (its tenant is not fail_closed).
    chat = list(client(base_url, chat_keeping).chat.completions.create(**CHAT))
    assert dumped(chat) == expected_chat
    assert only(chat_keeping).body == chat_bytes

    # 4. A fail_closed tenant is refused before the provider is called, in OpenAI's error shape.
    chat_calls = len(sim.simulator.requests("openai-chat"))
    with pytest.raises(openai.InternalServerError) as refused:
        client(base_url, strict_keeping, tenant=STRICT).chat.completions.create(**CHAT)
    assert refused.value.status_code == 503
    assert refused.value.code == "kafka_unavailable"
    assert refused.value.response.headers["retry-after"]
    assert len(sim.simulator.requests("openai-chat")) == chat_calls, "the provider was called"
    assert not local_kafka.status(broker_back).running, "all of this happened during the outage"

    # 3. Kafka back: the journal drains, and each run holds exactly the events of its bytes.
    local_kafka.start(broker_back)
    until(lambda: metric(gateway, HELD) == 0 and metric(gateway, DRAINED) > 0,
          "the journal drained")
    assert metric(gateway, DRAINED) == metric(gateway, SPOOLED)
    for keeping in (paced_keeping, chat_keeping):
        exchange = only(keeping)
        assert_run_is_normalized_bytes(gateway, exchange.headers[RUN_ID_HEADER], exchange.body)
