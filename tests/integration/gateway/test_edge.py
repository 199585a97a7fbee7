"""The gateway's edge over real HTTP (uvicorn on loopback) with the real broker (issue #11 §3).

What every request meets before a route does its work (services/gateway/app.py, ``Edge``): the
bearer token is checked before any body is read, every body is bounded per route before it is
read (and while a chunked one grows), a body that does not arrive in time is cut with 408, and a
client's mistakes are 4xx that say what to do — 503 only when Kafka did not acknowledge.

Several tests speak HTTP over a raw socket: they must send headers without a body, a body that
never ends, or one that trickles, and see the answer come before the body did — what an HTTP
client library does not let a test do.
"""

from __future__ import annotations

import base64
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from modelevents.schemas.frames import ProviderFrame
from modelevents.services.gateway.config import GatewayConfig, ProviderConfig
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from tests.integration.gateway.test_webhooks import gateway_starter
from tests.integration.pipeline import run

pytestmark = pytest.mark.kafka

TOKEN = "tok_" + secrets.token_hex(16)
AUTH = f"Authorization: Bearer {TOKEN}\r\n"
MiB = 1024 * 1024
SECRET = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
# OpenAI webhooks for the default tenant; no provider behind the base URL (nothing is fetched).
WEBHOOKS = {"openai": ProviderConfig(base_url="http://127.0.0.1:9",
                                     webhook_secrets={"default": [SECRET]})}


def edge_config(settings: PipelineSettings, **overrides: Any) -> GatewayConfig:
    values: dict[str, Any] = {"kafka": settings, "ack_timeout_s": 3.0,
                              "api_tokens": {"default": [TOKEN]}}
    return GatewayConfig(**(values | overrides))


@pytest.fixture
def start_gateway(pipeline_settings: PipelineSettings) -> Iterator[Callable[..., ServedApp]]:
    yield from gateway_starter(lambda **overrides: edge_config(pipeline_settings, **overrides))


@pytest.fixture
def gateway(start_gateway: Callable[..., ServedApp]) -> ServedApp:
    return start_gateway()


def frames_written(settings: PipelineSettings) -> list[ProviderFrame]:
    async def read() -> list[ProviderFrame]:
        return [r.value async for r in clients.read_records(settings, "frames", timeout=2.0)]
    return run(read())


# --- raw HTTP ---------------------------------------------------------------------------------


def connect(served: ServedApp, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", served.port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(method: str, path: str, *lines: str) -> bytes:
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(lines) + "\r\n").encode()


def read_answer(sock: socket.socket) -> tuple[int, bytes, bool]:
    """(status, everything read, whether the server closed the connection after it)."""
    data = b""
    closed = False
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
        if b"\r\n\r\n" in data:
            headers, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in headers.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), None)
            if length is not None and len(body) >= length:
                break
    assert data.startswith(b"HTTP/1.1 "), data[:200]
    return int(data[9:12]), data, closed


def closed_after(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


# --- 1: authenticate first, bound every body --------------------------------------------------


def test_an_unauthenticated_request_is_401_before_its_body_is_sent(gateway):
    # 200 MB announced, not one byte sent: the answer must not wait for them.
    with connect(gateway) as sock:
        sock.sendall(head("POST", "/v1/runs", "Content-Type: application/json\r\n",
                          "Content-Length: 200000000\r\n"))
        status, data, _ = read_answer(sock)
        assert status == 401, data
        assert b"www-authenticate: Bearer" in data.lower().replace(b"bearer", b"Bearer")
        assert closed_after(sock), "the connection stays open for the unread body"
    with connect(gateway) as sock:
        sock.sendall(head("POST", "/v1/runs", "Authorization: Bearer nope\r\n",
                          "Content-Length: 200000000\r\n"))
        status, data, _ = read_answer(sock)
        assert status == 401 and b"not one of this gateway's api_tokens" in data, data


def test_a_body_declared_over_the_routes_limit_is_413_before_it_is_read(gateway):
    for path, limit in (("/v1/runs", 4 * MiB), ("/v1/runs/run-x/frames?api=responses", 64 * MiB),
                        ("/v1/runs/run-x/cancel", 64 * 1024)):
        with connect(gateway) as sock:
            sock.sendall(head("POST", path, AUTH, "Content-Type: application/json\r\n",
                              f"Content-Length: {limit + 1}\r\n"))
            status, data, _ = read_answer(sock)
            assert status == 413, (path, data)
            assert str(limit).encode() in data, data
            assert closed_after(sock)


def test_a_chunked_body_growing_past_the_limit_is_413_as_soon_as_it_does(start_gateway):
    served = start_gateway(max_run_request_bytes=256 * 1024)
    chunk = b"x" * (64 * 1024)
    sent = 0
    with connect(served) as sock:
        sock.sendall(head("POST", "/v1/runs", AUTH, "Content-Type: application/json\r\n",
                          "Transfer-Encoding: chunked\r\n"))
        # Up to 64 MiB, unless the server answers (and stops reading) first.
        try:
            while sent < 64 * MiB:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, data, _ = read_answer(sock)
    assert status == 413, data
    assert b"max_run_request_bytes" in data
    # The socket buffers on both sides hold a few MiB; the server stopped far short of 64.
    assert sent < 16 * MiB, f"{sent} bytes were taken before the 413"


def test_requests_within_the_limits_pass_the_edge(gateway):
    auth = {"authorization": f"Bearer {TOKEN}"}
    # A neutral request of a realistic size: past the edge, the route answers (no provider here).
    big_text = "word " * (512 * 1024)  # 2.5 MiB, under 4 MiB
    neutral = {"target": {"provider": "anthropic", "model": "claude-sonnet-4-5"},
               "transcript": [{"role": "user", "parts": [{"type": "text", "text": big_text}]}]}
    answer = httpx.post(gateway.url + "/v1/runs", json=neutral, headers=auth, timeout=30)
    assert answer.status_code == 422 and answer.json()["code"] == "capability_rejected", \
        answer.text
    assert httpx.get(gateway.url + "/healthz").status_code == 200  # no token needed off /v1/
    assert httpx.get(gateway.url + "/v1/runs/run-x").status_code == 401


# --- 4: a read timeout per request ------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/runs", "/webhooks/openai"])
def test_a_body_that_stops_is_cut_with_408(start_gateway, path):
    served = start_gateway(read_timeout_s=1.0, providers=WEBHOOKS)
    with connect(served) as sock:
        sock.sendall(head("POST", path, AUTH, "Content-Type: application/json\r\n",
                          "Content-Length: 1000\r\n") + b'{"target": ')
        started = time.monotonic()
        status, data, _ = read_answer(sock)
        waited = time.monotonic() - started
        assert status == 408, data
        assert b"read_timeout_s" in data
        assert 0.8 < waited < 5, waited
        assert closed_after(sock), "the connection of a cut request stays open"


def test_a_body_that_trickles_is_cut_with_408(start_gateway):
    served = start_gateway(read_timeout_s=1.5)
    with connect(served) as sock:
        sock.sendall(head("POST", "/v1/runs", AUTH, "Content-Type: application/json\r\n",
                          "Content-Length: 100000\r\n"))
        started = time.monotonic()
        sock.settimeout(0.2)
        answer = b""
        # A byte every 0.2 s: each read succeeds, the whole never arrives.
        while time.monotonic() - started < 10 and not answer:
            try:
                sock.sendall(b" ")
                answer = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert 1.3 < waited < 5, waited


def test_a_request_without_a_body_is_not_cut_however_long_the_connection_lives(start_gateway):
    # The timeout bounds a body's arrival only: a keep-alive connection's later request is a
    # request of its own, and a GET has no body to wait for.
    served = start_gateway(read_timeout_s=0.5)
    with connect(served) as sock:
        for _ in range(2):
            sock.sendall(head("GET", "/healthz"))
            status, data, closed = read_answer(sock)
            assert (status, closed) == (200, False), data
            time.sleep(1.0)


# --- 5: a client's mistakes are 4xx that say what to do ---------------------------------------


def signed(body: bytes, webhook_id: str, **extra: str) -> dict[str, str]:
    sent_at = datetime.now(tz=UTC)
    return {"webhook-id": webhook_id, "webhook-timestamp": str(int(sent_at.timestamp())),
            "webhook-signature": Webhook(SECRET).sign(webhook_id, sent_at, body.decode()),
            "content-type": "application/json", **extra}


def test_unknown_routes_and_methods_are_4xx_in_the_one_error_shape(gateway):
    auth = {"authorization": f"Bearer {TOKEN}"}
    answer = httpx.get(gateway.url + "/v2/nothing", headers=auth)
    assert answer.status_code == 404 and "/docs" in answer.json()["error"], answer.text
    answer = httpx.delete(gateway.url + "/v1/runs", headers=auth)
    assert answer.status_code == 405 and "POST" in answer.json()["error"], answer.text
    answer = httpx.post(gateway.url + "/v1/runs", content=b"{not json", headers=auth)
    assert answer.status_code == 422 and answer.json()["code"] == "invalid_request", answer.text


def test_webhook_mistakes_are_4xx_and_write_nothing(start_gateway, pipeline_settings):
    served = start_gateway(providers=WEBHOOKS)
    body = b'{"type": "response.completed", "data": {"id": "resp_edge"}}'
    url = served.url + "/webhooks/openai"
    cases = {
        "a webhook-id that is not an id": (400, signed(body, "wh 1"), "webhook-id"),
        "a signature header past its cap": (
            431, signed(body, "wh_long_sig", **{"webhook-signature": " ".join(["v1,x"] * 1000)}),
            "webhook-signature"),
        "a content type past its cap": (
            431, signed(body, "wh_long_ct", **{"content-type": "application/json;" + "x" * 300}),
            "content-type"),
        "no such tenant": (404, signed(body, "wh_tenant"), "webhook_secrets"),
    }
    for what, (status, headers, named) in cases.items():
        path = url + ("/nobody" if what == "no such tenant" else "")
        answer = httpx.post(path, content=body, headers=headers, timeout=30)
        assert answer.status_code == status, (what, answer.text)
        assert named in answer.json()["error"], (what, answer.text)
    assert httpx.post(url, content=body, headers=signed(body, "wh_fine"), timeout=30
                      ).status_code == 200
    written = {f.frame_id for f in frames_written(pipeline_settings)}
    assert written == {"wh_fine"}, written
