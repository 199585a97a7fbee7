"""The gateway's webhooks over real HTTP (uvicorn on a loopback port) into a real Kafka broker.

This module runs its own broker (19500 + 10 * xdist worker + MODELEVENTS_TEST_PORT_OFFSET),
because one test stops and restarts it in the middle of a delivery. Each test gets fresh topics.
The gateway is the app `modelevents gateway` serves (``create_app``), in a uvicorn server on a
thread of the test process, so its log lines reach ``caplog``. The providers are the one part
faked: a tiny HTTP server (uvicorn too) answers ``GET /v1/responses/{id}`` and
``GET /v1beta/interactions/{id}`` with recorded objects from ``tests/fixtures``.

Where a test says "one effect", it runs the real stream processor (``modelevents worker``, a
subprocess, as tests/integration/processor/test_processor.py does) and counts what users see on
``events``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from standardwebhooks.webhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.services.cli.settings_tree import load_gateway_config
from modelevents.services.errors import WebhookRejected
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.config import GatewayConfig, ProviderConfig
from modelevents.services.gateway.inputs.webhook_limits import WEBHOOK_BODY_FIT
from modelevents.services.gateway.routes.webhooks import verify_signature
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import kafka_broker as local_kafka
from modelevents.services.local.asgi_thread import ServedApp, serve_in_thread
from tests.corpus import CORPUS_DIR, require_corpus
from tests.integration.conftest import restartable_broker
from tests.integration.pipeline import Published, collect, run
from tests.paths import FIXTURES

pytestmark = pytest.mark.kafka

OPENAI_OBJECT = FIXTURES / "openai-responses" / "poll-3-completed.json"  # id resp_poll
GEMINI_OBJECT = FIXTURES / "gemini-interactions" / "poll-completed.json"  # id v1_bg
TEST_VECTOR = CORPUS_DIR / "openai" / "openai-python" / "webhook-test-vector.json"

# Credentials that must never show up in a frame or a log line.
API_KEY = "sk-test-" + secrets.token_hex(16)
GEMINI_KEY = "AIza-test-" + secrets.token_hex(16)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


SECRET_NEW, SECRET_OLD, SECRET_ACME, SECRET_GEMINI = (new_secret() for _ in range(4))


# --- servers on loopback --------------------------------------------------------------------


class FakeProvider:
    """OpenAI's GET /v1/responses/{id} and Gemini's GET /v1beta/interactions/{id}, serving
    recorded objects (their ids rewritten to the requested one); ``fail_first`` answers 503
    that many times first. Records every request's path and credential header."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.fail_first = 0
        app = Starlette(routes=[
            Route("/v1/responses/{object_id}", self.openai),
            Route("/v1beta/interactions/{object_id}", self.gemini)])
        self.served = serve_in_thread(app)
        self.url = self.served.url

    def _answer(self, request: Request, recorded: Path) -> Response:
        self.requests.append((request.url.path, dict(request.headers)))
        if self.fail_first > 0:
            self.fail_first -= 1
            return Response(b'{"error":{"message":"overloaded"}}', status_code=503)
        object_id = request.path_params["object_id"]
        if object_id.startswith("missing"):
            return Response(b'{"error":{"message":"not found"}}', status_code=404)
        doc = json.loads(recorded.read_bytes())
        doc["id"] = object_id
        return Response(json.dumps(doc).encode(), media_type="application/json",
                        headers={"x-request-id": "req_fake"})

    async def openai(self, request: Request) -> Response:
        return self._answer(request, OPENAI_OBJECT)

    async def gemini(self, request: Request) -> Response:
        return self._answer(request, GEMINI_OBJECT)

    def wait_requests(self, count: int, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            assert time.monotonic() < deadline, f"provider saw {len(self.requests)} requests"
            time.sleep(0.05)


# --- fixtures -------------------------------------------------------------------------------


broker_settings, kafka_broker = restartable_broker(base_port=19500)


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.served.stop()


def gateway_config(settings: PipelineSettings, provider_url: str, **overrides: Any) -> GatewayConfig:
    values: dict[str, Any] = dict(
        kafka=settings, ack_timeout_s=3.0, fetch_backoff_s=0.1, fetch_attempts=4,
        providers={
            "openai": ProviderConfig(base_url=provider_url, api_key=API_KEY, webhook_secrets={
                "default": [SECRET_NEW, SECRET_OLD], "acme": [SECRET_ACME]}),
            "gemini": ProviderConfig(base_url=provider_url, api_key=GEMINI_KEY,
                                     webhook_secrets={"default": [SECRET_GEMINI]}),
        })
    values.update(overrides)
    return GatewayConfig(**values)


def gateway_starter(make_config: Callable[..., GatewayConfig]
                    ) -> Iterator[Callable[..., ServedApp]]:
    """A fixture's body: yields ``start(**overrides)``, which serves a gateway of
    ``make_config(**overrides)``; every gateway started is stopped at the end."""
    started: list[ServedApp] = []

    def start(**overrides: Any) -> ServedApp:
        served = serve_in_thread(create_app(make_config(**overrides)))
        started.append(served)
        return served

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def start_gateway(settings: PipelineSettings, provider: FakeProvider
                  ) -> Iterator[Callable[..., ServedApp]]:
    yield from gateway_starter(lambda **overrides: gateway_config(settings, provider.url,
                                                                  **overrides))


@pytest.fixture
def gateway(start_gateway: Callable[..., ServedApp]) -> ServedApp:
    return start_gateway()


# --- deliveries -----------------------------------------------------------------------------


def sign(secret: str, webhook_id: str, timestamp: str, body: bytes) -> str:
    # The Standard Webhooks reference library signs, so the gateway's verifier is checked
    # against an implementation written elsewhere.
    sent_at = datetime.fromtimestamp(int(timestamp), tz=UTC)
    return Webhook(secret).sign(webhook_id, sent_at, body.decode())


def openai_event(response_id: str, event_type: str = "response.completed") -> bytes:
    # Not json.dumps's spacing: the body must reach the frame byte for byte as sent.
    return (b'{"id": "evt_%s", "object": "event", "created_at": 1750861210, "type": "%s", '
            b'"data": {"id": "%s"}}' % (secrets.token_hex(6).encode(), event_type.encode(),
                                         response_id.encode()))


def delivery(body: bytes, secret: str = SECRET_NEW, webhook_id: str | None = None,
             timestamp: int | None = None, signature: str | None = None) -> dict[str, str]:
    webhook_id = webhook_id or f"wh_{secrets.token_hex(8)}"
    ts = str(int(time.time()) if timestamp is None else timestamp)
    return {"webhook-id": webhook_id, "webhook-timestamp": ts, "content-type": "application/json",
            "webhook-signature": signature or sign(secret, webhook_id, ts, body)}


def post(served: ServedApp, body: bytes, headers: dict[str, str], path: str = "/webhooks/openai"
         ) -> httpx.Response:
    return httpx.post(served.url + path, content=body, headers=headers, timeout=30)


def frames_on_topic(settings: PipelineSettings, idle: float = 2.0) -> list[tuple[bytes, ProviderFrame]]:
    async def read() -> list[tuple[bytes, ProviderFrame]]:
        return [(r.raw, r.value) async for r in clients.read_records(settings, "frames",
                                                                       timeout=idle)]
    return run(read())


def frames_with(settings: PipelineSettings, frame_id: str) -> list[ProviderFrame]:
    return [f for _, f in frames_on_topic(settings) if f.frame_id == frame_id]


def wait_frame(settings: PipelineSettings, frame_id: str, timeout: float = 20.0) -> ProviderFrame:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = frames_with(settings, frame_id)
        if found:
            return found[0]
    raise AssertionError(f"no frame {frame_id} on the frames topic")


def finished(published: Published, run_id: str) -> list:
    return [e for e in published.events[run_id] if e.kind == "run.finished"]


# --- signature verification (Standard Webhooks; openai.md §11.2-11.3) -----------------------


def load_vector() -> dict[str, Any]:
    require_corpus()
    return json.loads(TEST_VECTOR.read_bytes())


def test_sdk_test_vector_verifies_and_tampering_does_not():
    vector = load_vector()
    keys = [base64.b64decode(vector["secret"].removeprefix("whsec_"))]
    body = vector["body"].encode()
    now = vector["verify_with_now"]
    assert verify_signature(vector["headers"], body, keys, tolerance_s=300, now=now) == (
        vector["headers"]["webhook-id"], vector["headers"]["webhook-timestamp"])
    with pytest.raises(WebhookRejected) as bad:
        verify_signature(vector["headers"], body.replace(b"resp_123", b"resp_124"), keys,
                         tolerance_s=300, now=now)
    assert bad.value.status == 401
    with pytest.raises(WebhookRejected) as old:
        verify_signature(vector["headers"], body, keys, tolerance_s=300, now=now + 301)
    assert (old.value.status, "too old" in old.value.reason) == (401, True)
    with pytest.raises(WebhookRejected) as new:
        verify_signature(vector["headers"], body, keys, tolerance_s=300, now=now - 301)
    assert (new.value.status, "too new" in new.value.reason) == (401, True)


def test_sdk_test_vector_over_http_becomes_a_verbatim_frame(settings, start_gateway, provider):
    vector = load_vector()
    # The vector was signed in 2025: a tolerance that covers its age lets the exact SDK bytes
    # through the real endpoint (the tolerance is configurable for this reason).
    age = int(time.time()) - int(vector["headers"]["webhook-timestamp"])
    served = start_gateway(
        webhook_tolerance_s=age + 600,
        providers={"openai": ProviderConfig(base_url=provider.url,
                                            webhook_secrets={"default": [vector["secret"]]})})
    body = vector["body"].encode()
    answer = post(served, body, dict(vector["headers"], **{"content-type": "application/json"}))
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "accepted"
    frame = wait_frame(settings, vector["headers"]["webhook-id"])
    assert frame.body == body
    assert (frame.run_key, frame.transport, frame.api, frame.provider) == (
        "resp_123", "webhook", "openai-responses", "openai")
    assert frame.headers["webhook-timestamp"] == vector["headers"]["webhook-timestamp"]


def test_bad_signature_stale_and_future_timestamps_are_refused_and_write_nothing(settings, gateway):
    body = openai_event("resp_refused")
    forged = delivery(body, secret=new_secret(), webhook_id="wh_forged")
    stale = delivery(body, webhook_id="wh_stale", timestamp=int(time.time()) - 310)
    future = delivery(body, webhook_id="wh_future", timestamp=int(time.time()) + 310)
    tampered = delivery(body, webhook_id="wh_tampered")
    assert post(gateway, body, forged).status_code == 401
    answer = post(gateway, body, stale)
    assert answer.status_code == 401 and "too old" in answer.json()["error"]
    answer = post(gateway, body, future)
    assert answer.status_code == 401 and "too new" in answer.json()["error"]
    assert post(gateway, body + b" ", tampered).status_code == 401
    written = {f.frame_id for _, f in frames_on_topic(settings)}
    assert written.isdisjoint({"wh_forged", "wh_stale", "wh_future", "wh_tampered"})


def test_missing_or_malformed_headers_are_400(gateway):
    body = openai_event("resp_x")
    full = delivery(body)
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        headers = {k: v for k, v in full.items() if k != name}
        answer = post(gateway, body, headers)
        assert answer.status_code == 400 and name in answer.json()["error"], name
    answer = post(gateway, body, dict(full, **{"webhook-timestamp": "yesterday"}))
    assert answer.status_code == 400 and "timestamp" in answer.json()["error"]


def test_unknown_provider_or_tenant_is_404(gateway):
    body = openai_event("resp_x")
    assert post(gateway, body, delivery(body), "/webhooks/anthropic").status_code == 404
    answer = post(gateway, body, delivery(body), "/webhooks/openai/nobody")
    assert answer.status_code == 404 and "webhook_secrets.nobody" in answer.json()["error"]


def test_rotated_secrets_each_verify_and_tenants_are_apart(settings, gateway):
    body = openai_event("resp_rotation")
    old = delivery(body, secret=SECRET_OLD)
    assert post(gateway, body, old).status_code == 200
    # During rotation the provider sends several signatures; one matching is enough.
    both = delivery(body, secret=SECRET_NEW)
    foreign = sign(new_secret(), both["webhook-id"], both["webhook-timestamp"], body)
    both["webhook-signature"] = f"{foreign} {both['webhook-signature']}"
    assert post(gateway, body, both).status_code == 200
    # A tenant's URL verifies with that tenant's secrets only, and stamps the tenant.
    acme = delivery(body, secret=SECRET_ACME)
    assert post(gateway, body, acme, "/webhooks/openai/acme").status_code == 200
    assert post(gateway, body, delivery(body, secret=SECRET_ACME)).status_code == 401
    assert post(gateway, body, delivery(body), "/webhooks/openai/acme").status_code == 401
    assert wait_frame(settings, acme["webhook-id"]).tenant == "acme"
    assert wait_frame(settings, old["webhook-id"]).tenant == "default"


def test_oversized_body_is_413_and_written_nowhere(settings, start_gateway):
    served = start_gateway(max_body_bytes=1024)
    body = b'{"type": "response.completed", "data": {"id": "resp_big"}, "pad": "' + b"x" * 2000 + b'"}'
    declared = delivery(body, webhook_id="wh_big_declared")
    assert post(served, body, declared).status_code == 413
    # Without Content-Length (chunked): refused once the limit is passed while reading.
    chunked = delivery(body, webhook_id="wh_big_chunked")
    answer = httpx.post(served.url + "/webhooks/openai", headers=chunked, timeout=30,
                        content=(body[i:i + 256] for i in range(0, len(body), 256)))
    assert answer.status_code == 413
    written = {f.frame_id for _, f in frames_on_topic(settings)}
    assert written.isdisjoint({"wh_big_declared", "wh_big_chunked"})


def padded_event(size: int, response_id: str) -> bytes:
    """A response.completed webhook body of exactly ``size`` bytes."""
    head = b'{"type": "response.completed", "data": {"id": "%s"}, "pad": "' % response_id.encode()
    return head + b"x" * (size - len(head) - 2) + b'"}'


def test_the_largest_accepted_body_is_written_and_one_byte_more_is_413_unverified(
        settings, gateway):
    limit = WEBHOOK_BODY_FIT
    assert gateway_config(settings, "http://127.0.0.1:9").max_body_bytes == limit
    largest = padded_event(limit, "resp_largest")
    headers = delivery(largest, webhook_id="wh_largest")
    answer = post(gateway, largest, headers)
    assert answer.status_code == 200, answer.text
    records = [(raw, f) for raw, f in frames_on_topic(settings) if f.frame_id == "wh_largest"]
    assert b"".join(f.body for _, f in records) == largest, "the body is kept verbatim"
    assert all(len(raw) <= MAX_RECORD_BYTES for raw, _ in records)
    # One byte more is refused before the signature is even looked at: a forged signature gets
    # the same 413 as a good one, not a 401.
    over = padded_event(limit + 1, "resp_over")
    for signature in (None, sign(new_secret(), "wh_over", str(int(time.time())), over)):
        answer = post(gateway, over, delivery(over, webhook_id="wh_over", signature=signature))
        assert answer.status_code == 413, answer.text
        assert "max_body_bytes" in answer.json()["error"]
    assert frames_with(settings, "wh_over") == []


def test_a_webhook_limit_no_frame_record_holds_is_a_config_error(settings):
    from modelevents.schemas.errors import ConfigError
    with pytest.raises(ConfigError) as refused:
        load_gateway_config(None, env={}, kafka=settings, max_body_bytes=1024 * 1024)
    assert "\n" not in str(refused.value) and f"at most {WEBHOOK_BODY_FIT}" in str(refused.value)
    assert load_gateway_config(None, env={}, kafka=settings, max_body_bytes=4096).max_body_bytes == 4096


def test_signed_body_that_is_not_json_is_kept_verbatim(settings, gateway):
    body = b"this is not json {"
    headers = delivery(body, webhook_id="wh_not_json")
    answer = post(gateway, body, headers)
    assert answer.status_code == 200, answer.text
    frame = wait_frame(settings, "wh_not_json")
    # No object id can be read: the delivery is its own run key, kept byte for byte.
    assert (frame.body, frame.run_key) == (body, "wh_not_json")


# --- the fetch of the object a webhook names ------------------------------------------------


def test_response_webhook_fetches_the_response_as_a_poll_frame(settings, gateway, provider):
    provider.fail_first = 1  # the first GET fails with 503: the fetch retries
    seen = len(provider.requests)
    body = openai_event("resp_fetched")
    headers = delivery(body)
    assert post(gateway, body, headers).status_code == 200
    poll = wait_frame(settings, f"poll:resp_fetched:{headers['webhook-id']}")
    assert (poll.transport, poll.run_key, poll.api, poll.http_status) == (
        "poll", "resp_fetched", "openai-responses", 200)
    assert orjson.loads(poll.body)["id"] == "resp_fetched"
    assert poll.headers == {"x-request-id": "req_fake"}
    paths = [(path, h.get("authorization")) for path, h in provider.requests[seen:]]
    assert paths == [("/v1/responses/resp_fetched", f"Bearer {API_KEY}")] * 2


def test_gemini_interaction_webhook_is_framed_and_fetched(settings, gateway, provider):
    seen = len(provider.requests)
    body = b'{"type": "interaction.completed", "data": {"id": "v1_hooked"}}'
    headers = delivery(body, secret=SECRET_GEMINI)
    answer = post(gateway, body, headers, "/webhooks/gemini")
    assert answer.status_code == 200, answer.text
    frame = wait_frame(settings, headers["webhook-id"])
    assert (frame.run_key, frame.api, frame.provider) == ("v1_hooked", "gemini-interactions",
                                                         "google")
    poll = wait_frame(settings, f"poll:v1_hooked:{headers['webhook-id']}")
    assert poll.transport == "poll"
    provider.wait_requests(seen + 1)
    path, sent = provider.requests[seen]
    assert (path, sent.get("x-goog-api-key")) == ("/v1beta/interactions/v1_hooked", GEMINI_KEY)


def test_an_object_id_that_is_not_an_id_keys_nothing_and_is_not_fetched(settings, gateway,
                                                                          provider):
    # In a fetch URL it would change the path the tenant's key is sent to.
    seen = len(provider.requests)
    body = b'{"type": "response.completed", "data": {"id": "../../v1/files"}}'
    headers = delivery(body)
    assert post(gateway, body, headers).status_code == 200
    frame = wait_frame(settings, headers["webhook-id"])
    assert (frame.body, frame.run_key) == (body, headers["webhook-id"])
    time.sleep(1.0)
    assert provider.requests[seen:] == []


def test_a_fetch_the_provider_refuses_is_logged_and_never_blocks(settings, gateway, caplog):
    caplog.set_level(logging.INFO, logger="modelevents.gateway")
    body = openai_event("missing_resp")
    headers = delivery(body)
    started = time.monotonic()
    assert post(gateway, body, headers).status_code == 200
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 10
    while "HTTP 404" not in caplog.text:
        assert time.monotonic() < deadline, caplog.text
        time.sleep(0.05)
    assert frames_with(settings, f"poll:missing_resp:{headers['webhook-id']}") == []


# --- exactly one effect ---------------------------------------------------------------------


def test_the_same_delivery_twice_has_one_effect(settings, start_gateway, start_worker):
    worker = start_worker()
    first = start_gateway()
    body = openai_event("resp_twice")
    headers = delivery(body)
    assert post(first, body, headers).json()["status"] == "accepted"
    assert post(first, body, headers).json()["status"] == "duplicate"  # no second write
    first.stop()
    # A restarted gateway has forgotten the delivery: it is written (and fetched) again; the
    # processor drops the copies (same frame ids), so users see the run once.
    second = start_gateway()
    assert post(second, body, headers).json()["status"] == "accepted"
    poll_id = f"poll:resp_twice:{headers['webhook-id']}"
    deadline = time.monotonic() + 30
    while len(frames_with(settings, poll_id)) < 2:
        assert time.monotonic() < deadline, "the second gateway did not fetch again"
    assert len(frames_with(settings, headers["webhook-id"])) == 2
    published = run(collect(settings, lambda p: len(finished(p, "resp_twice")) >= 1,
                            worker.log_text))
    time.sleep(3)  # would a second effect come?
    published = run(collect(settings, lambda p: p.runs.get("resp_twice") is not None
                            and p.runs["resp_twice"].last_seq + 1 == len(
                                p.deduped("resp_twice"))))
    events = list(published.deduped("resp_twice").values())
    assert [e.kind for e in events].count("run.finished") == 1
    assert [e.kind for e in events].count("run.started") == 1
    assert "".join(e.payload.text for e in events if e.kind == "text.done") == "The answer is 42."
    assert not [e for e in events if e.kind in ("unknown", "error")], \
        "a webhook notification is understood: it neither looks unknown nor truncates the run"
    assert len(published.events["resp_twice"]) == len(events), "no event was published twice"


def test_a_hundred_copies_at_once_are_one_frame_and_one_fetch(settings, gateway, provider):
    body = openai_event("resp_hundred")
    headers = delivery(body, webhook_id="wh_hundred")

    async def deliver_all() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(base_url=gateway.url, limits=limits, timeout=30) as client:
            return await asyncio.gather(*(client.post("/webhooks/openai", content=body,
                                                      headers=headers) for _ in range(100)))

    seen = len(provider.requests)
    answers = run(deliver_all())
    assert [a.status_code for a in answers] == [200] * 100, [a.text for a in answers][:3]
    wait_frame(settings, "poll:resp_hundred:wh_hundred")
    time.sleep(1.0)  # would a second fetch come?
    fetches = [path for path, _ in provider.requests[seen:]]
    assert fetches == ["/v1/responses/resp_hundred"], fetches
    assert len(frames_with(settings, "wh_hundred")) == 1
    assert len(frames_with(settings, "poll:resp_hundred:wh_hundred")) == 1


def test_kafka_stopped_during_a_delivery_503_then_the_retry_has_one_effect(
        broker_settings, settings, start_gateway, start_worker):
    worker = start_worker()
    served = start_gateway()
    # A delivery before the outage: the producer knows the topic, so the next one's record is
    # queued at once and stays queued through the outage (where a retry could be written twice).
    warm_up = openai_event("resp_before_outage")
    assert post(served, warm_up, delivery(warm_up)).status_code == 200
    body = openai_event("resp_outage")
    headers = delivery(body)
    local_kafka.stop(broker_settings)
    try:
        answer = post(served, body, headers)
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"] == "5"
        # What happened, for the client; how to run Kafka is the operator's (the log's).
        assert answer.json()["code"] == "kafka_unavailable"
        assert "Kafka behind the gateway" in answer.text and "kafka start" not in answer.text
        assert httpx.get(served.url + "/readyz", timeout=30).status_code == 503
        # A forwarded stream is refused alike: the application sends the same body again.
        stream = b'data: {"type": "response.created", "sequence_number": 0}\n\n'
        forwarded = httpx.post(served.url + "/v1/runs/run-outage/frames?api=responses&end=none",
                               content=stream, headers={"content-type": "text/event-stream"},
                               timeout=30)
        assert forwarded.status_code == 503 and forwarded.headers["retry-after"] == "5"
        assert "kafka start" not in forwarded.text
    finally:
        local_kafka.start(broker_settings)  # same data directory: the log survives
    # The provider retries the same delivery (same webhook-id) until it gets a 2xx.
    deadline = time.monotonic() + 60
    while (answer := post(served, body, headers)).status_code != 200:
        assert answer.status_code == 503 and time.monotonic() < deadline, answer.text
        time.sleep(0.5)
    assert answer.json()["frame_id"] == headers["webhook-id"]
    assert httpx.get(served.url + "/readyz", timeout=30).status_code == 200
    published = run(collect(settings, lambda p: len(finished(p, "resp_outage")) >= 1,
                            worker.log_text))
    time.sleep(3)
    published = run(collect(settings, lambda p: p.runs.get("resp_outage") is not None))
    kinds = [e.kind for e in published.deduped("resp_outage").values()]
    assert kinds.count("run.finished") == 1 and kinds.count("run.started") == 1
    assert len(published.events["resp_outage"]) == len(kinds)
    # The refused attempt's record stayed queued and was written once the broker was back; the
    # retries joined that one send instead of writing the delivery again.
    assert len(frames_with(settings, headers["webhook-id"])) == 1
    assert len(frames_with(settings, f"poll:resp_outage:{headers['webhook-id']}")) == 1


# --- credentials, health, OpenAPI, config ---------------------------------------------------


def test_credentials_never_reach_frames_or_logs(settings, gateway, provider, caplog):
    caplog.set_level(logging.DEBUG)
    body = openai_event("resp_secret_check")
    headers = delivery(body)
    headers["authorization"] = f"Bearer {API_KEY}"  # a sender's credential must not be kept
    assert post(gateway, body, headers).status_code == 200
    post(gateway, body, delivery(body, secret=new_secret()))  # a refusal is logged too
    wait_frame(settings, f"poll:resp_secret_check:{headers['webhook-id']}")
    raw = b"".join(value for value, _ in frames_on_topic(settings))
    text = caplog.text
    for secret in (API_KEY, GEMINI_KEY, SECRET_NEW, SECRET_OLD, SECRET_ACME,
                   SECRET_NEW.removeprefix("whsec_")):
        assert secret.encode() not in raw
        assert secret not in text
    frame = frames_with(settings, headers["webhook-id"])[0]
    assert set(frame.headers) <= {"webhook-id", "webhook-timestamp", "webhook-signature",
                                  "user-agent"}
    config = gateway_config(settings, provider.url)
    assert API_KEY not in repr(config) and SECRET_NEW not in repr(config)


def test_health_readiness_and_openapi(settings, make_settings, start_gateway, gateway):
    assert httpx.get(gateway.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(gateway.url + "/readyz", timeout=30)
    assert ready.status_code == 200 and ready.json()["status"] == "ready"
    bare = start_gateway(kafka=make_settings(create_topics=False))
    answer = httpx.get(bare.url + "/readyz", timeout=30)
    assert answer.status_code == 503 and "topics create" in answer.json()["reason"]
    spec = httpx.get(gateway.url + "/openapi.json").json()
    for path in ("/webhooks/{provider}", "/webhooks/{provider}/{tenant}",
                 "/v1/runs/{run_id}/frames", "/healthz", "/readyz"):
        assert path in spec["paths"], path
    assert "webhook-signature" in json.dumps(spec["paths"]["/webhooks/{provider}"])
    assert httpx.get(gateway.url + "/docs").status_code == 200


def test_config_file_and_environment(tmp_path, settings):
    path = tmp_path / "gateway.yaml"
    path.write_text(f"port: 9123\nwebhook_tolerance_s: 60\nproviders:\n  openai:\n"
                    f"    webhook_secrets:\n      acme: [{SECRET_ACME}]\n")
    env = {"OPENAI_API_KEY": API_KEY, "OPENAI_WEBHOOK_SECRET": f"{SECRET_NEW},{SECRET_OLD}",
           "OPENAI_BASE_URL": "http://127.0.0.1:1/"}
    config = load_gateway_config(path, env=env, kafka=settings)
    openai = config.providers["openai"]
    assert (config.port, config.webhook_tolerance_s, openai.base_url) == (9123, 60, "http://127.0.0.1:1")
    assert openai.api_key.get_secret_value() == API_KEY
    assert [s.get_secret_value() for s in openai.webhook_secrets["default"]] == [SECRET_NEW, SECRET_OLD]
    assert sorted(openai.webhook_secrets) == ["acme", "default"]
    toml = tmp_path / "gateway.toml"
    toml.write_text('port = "not a port"\n')
    from modelevents.schemas.errors import ConfigError
    with pytest.raises(ConfigError, match="port"):
        load_gateway_config(toml, env={}, kafka=settings)
    bad = tmp_path / "bad.yaml"
    bad.write_text("providers:\n  mistral: {base_url: 'https://x'}\n")
    with pytest.raises(ConfigError, match="unknown provider"):
        load_gateway_config(bad, env={}, kafka=settings)
    # Anthropic is a provider for runs, from its SDK's variables, and sends no webhooks.
    claude = load_gateway_config(None, env={"ANTHROPIC_API_KEY": "sk-ant-x",
                                    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, kafka=settings)
    anthropic = claude.provider("anthropic")
    assert anthropic.base_url == "http://127.0.0.1:9" and not anthropic.webhook_secrets
    assert anthropic.api_key.get_secret_value() == "sk-ant-x"
    assert claude.provider("google") is claude.provider("gemini")  # the events' name finds it
    with pytest.raises(ConfigError, match="cannot read"):
        load_gateway_config(tmp_path / "absent.yaml", env={}, kafka=settings)
