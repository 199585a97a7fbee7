"""The gateway's GET /metrics, scraped from a running gateway on the real broker: what a
Prometheus server reads after deliveries, refusals and API calls (parsed with
prometheus-client's own text parser, as a scraper would)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelevents.services.gateway.metrics import route_template
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from tests.integration.gateway.test_webhooks import (
    FakeProvider,
    delivery,
    gateway_config,
    gateway_starter,
    new_secret,
    openai_event,
    post,
)

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.served.stop()


@pytest.fixture
def gateway(settings: PipelineSettings, provider: FakeProvider) -> Iterator[ServedApp]:
    starter = gateway_starter(lambda **overrides: gateway_config(settings, provider.url,
                                                                 **overrides))
    start: Callable[..., ServedApp] = next(starter)
    yield start()
    next(starter, None)


def scrape(served: ServedApp) -> dict[tuple[str, frozenset], float]:
    answer = httpx.get(served.url + "/metrics", timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(answer.text)
            for sample in family.samples}


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_deliveries_refusals_and_requests_are_counted(gateway: ServedApp) -> None:
    before = scrape(gateway)
    body = openai_event("resp_metrics")
    assert post(gateway, body, delivery(body)).status_code == 200
    assert post(gateway, body, delivery(body, secret=new_secret())).status_code == 401
    assert post(gateway, body, {"content-type": "application/json"}).status_code == 400
    # 404, or 503 while the gateway's views still read their topics: counted as answered.
    read = httpx.get(gateway.url + "/v1/runs/run-unknown-1/messages", timeout=10).status_code
    assert read in (404, 503)
    time.sleep(0.2)  # the last exchange is observed as its response ends
    after = scrape(gateway)

    def grew(name: str, by: float, **labels: str) -> None:
        assert value(after, name, **labels) - value(before, name, **labels) == by, (name, labels)

    grew("modelevents_gateway_frames_written_total", 1,
         provider="openai", api="openai-responses", transport="webhook")
    grew("modelevents_gateway_webhook_rejections_total", 1, provider="openai", status="401")
    grew("modelevents_gateway_webhook_rejections_total", 1, provider="openai", status="400")
    http = "modelevents_gateway_http_request_duration_seconds_count"
    grew(http, 1, route="/webhooks/{provider}", method="POST", status="200")
    grew(http, 1, route="/webhooks/{provider}", method="POST", status="401")
    grew(http, 1, route="/v1/runs/{run_id}/messages", method="GET", status=str(read))
    # Run ids never become label values: a scrape stays small however many runs were read.
    assert not any("run-unknown-1" in str(labels) for _, labels in after)


def test_route_labels_are_templates() -> None:
    assert route_template("/v1/runs") == "/v1/runs"
    assert route_template("/v1/runs/r-1") == "/v1/runs/{run_id}"
    assert route_template("/v1/runs/r-1/events") == "/v1/runs/{run_id}/events"
    assert route_template("/v1/runs/r-1/anything-else") == "/v1/runs/{run_id}"
    assert route_template("/v1/runs/r-1/events/17") == "/v1/runs/{run_id}/events/{seq}"
    assert route_template("/v1/runs/r-1/approvals/ap-1") == (
        "/v1/runs/{run_id}/approvals/{approval_id}")
    assert route_template("/ui") == "/ui" and route_template("/ui/app.js") == "/ui/{asset}"
    assert route_template("/webhooks/openai/acme") == "/webhooks/{provider}/{tenant}"
    assert route_template("/no/such/path") == "other"
