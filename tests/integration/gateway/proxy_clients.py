"""What the drop-in proxy's tests share: an HTTP transport that keeps the bytes each response
brought (as the SDK read them), a proxied gateway's base URLs, and the check that a run's events
on Kafka are what ``normalize_bytes`` makes of those bytes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import httpx
import orjson

from modelevents.adapters.registry import normalize_bytes
from modelevents.services.local.asgi_thread import ServedApp
from tests.integration.simulated_gateway import SETTLE_S, comparable, sse_events

RUN_ID_HEADER = "x-modelevents-run-id"
TERMINAL = ("completed", "incomplete", "failed", "cancelled", "waiting_for_tool")


@dataclass
class Exchange:
    method: str
    path: str
    status: int
    headers: Any
    body: bytes


@dataclass
class Keeping:
    """Every exchange of a client, its response body as the bytes that reached it."""

    exchanges: list[Exchange] = field(default_factory=list)

    def client(self, http: ModuleType = httpx) -> Any:
        """An HTTP client of ``http`` (httpx, or the httpx2 the anthropic SDK takes) that keeps
        every exchange."""
        return http.Client(transport=_keeping_transport(self, http), timeout=60)


def _keeping_transport(keeping: Keeping, http: ModuleType) -> Any:
    class Kept(http.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, request: Any, response: Any) -> None:
            self.request, self.response = request, response
            self.chunks: list[bytes] = []
            self.kept = False

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self.response.stream:
                self.chunks.append(chunk)
                yield chunk
            self.keep()

        def keep(self) -> None:
            if not self.kept:
                self.kept = True
                keeping.exchanges.append(Exchange(
                    self.request.method, self.request.url.path, self.response.status_code,
                    self.response.headers, b"".join(self.chunks)))

        def close(self) -> None:
            # An SDK may stop reading at the stream's last event: what it read is kept.
            self.keep()
            self.response.stream.close()

    class KeepingTransport(http.BaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            self.inner = http.HTTPTransport()

        def handle_request(self, request: Any) -> Any:
            response = self.inner.handle_request(request)
            return http.Response(response.status_code, headers=response.headers,
                                 stream=Kept(request, response),
                                 extensions=response.extensions)

        def close(self) -> None:
            self.inner.close()

    return KeepingTransport()


def proxy_urls(gateway: ServedApp, upstream: str | None = None) -> dict[str, str]:
    """Where each SDK points to go through the gateway (as the simulator's ``urls()``)."""
    base = f"{gateway.url}/proxy"
    return {"openai": f"{base}/{upstream or 'openai'}/v1",
            "anthropic": f"{base}/{upstream or 'anthropic'}",
            "google-genai": f"{base}/{upstream or 'gemini'}"}


def run_state(gateway: ServedApp, run_id: str) -> dict[str, Any] | None:
    response = httpx.get(f"{gateway.url}/v1/runs/{run_id}", timeout=30)
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    return response.json()["state"]


def wait_state(gateway: ServedApp, run_id: str, statuses: tuple[str, ...] = TERMINAL
               ) -> dict[str, Any]:
    deadline = time.monotonic() + SETTLE_S
    while True:
        state = run_state(gateway, run_id)
        if state is not None and state["status"] in statuses:
            return state
        assert time.monotonic() < deadline, f"run {run_id} did not settle: {state}"
        time.sleep(0.1)


def assert_run_is_normalized_bytes(gateway: ServedApp, run_id: str, body: bytes) -> list[str]:
    """The run's events on Kafka (GET /v1/runs/{id}/events) are what ``normalize_bytes`` makes
    of ``body``, the bytes the client got; the kinds, for the caller's own checks."""
    wait_state(gateway, run_id)
    expected = normalize_bytes(body, run_id=run_id).events
    deadline = time.monotonic() + SETTLE_S
    while True:
        received = sse_events(gateway, run_id, follow="false")
        if len(received) >= len(expected) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [kind for _, kind, _ in received] == [e.kind for e in expected]
    assert [comparable(data) for _, _, data in received] == [
        comparable(orjson.loads(orjson.dumps(e.projection(), default=str))) for e in expected]
    return [kind for _, kind, _ in received]
