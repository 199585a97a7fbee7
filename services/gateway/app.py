"""The gateway's ASGI app: ``create_app(config)`` composes one router per concern.

    health.py     GET /healthz, GET /readyz
    webhooks.py   POST /webhooks/{provider}[/{tenant}]   (Standard Webhooks, OpenAI and Gemini)
    runs.py       POST /v1/runs, GET /v1/runs/{id}[/events|/messages], POST /v1/runs/{id}/cancel
    forwarded.py  POST /v1/runs/{run_id}/frames          (streams an application tees to us)

Another concern is one more module with an ``APIRouter`` named ``router`` and one more entry in
:data:`ROUTERS`. OpenAPI is served at ``/openapi.json`` and ``/docs``.

The app's lifespan starts what every request shares through ``app.state.gateway``
(``services/gateway/state.py``): one idempotent Kafka producer (acks=all), the fetcher, the HTTP
client to the providers, the capability manifest, the calls in flight and the view of the
``runs`` topic; it stops them on shutdown (calls in flight are cancelled: their frames so far
are on Kafka, and the run's state says where it stopped). A :class:`KafkaUnavailable` (or another pipeline error) raised while a request waits
for Kafka becomes 503 with ``Retry-After``: the sender retries, and nothing that was
acknowledged is ever lost.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

import httpx

from modelevents.schemas.errors import ModelEventsError
from modelevents.services.gateway import forwarded, health, runs, webhooks
from modelevents.services.gateway.capabilities import MANIFEST_PATH, Manifest, load_manifest
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.fetch import Fetcher
from modelevents.services.gateway.run_views import RunStates
from modelevents.services.gateway.state import Gateway, unavailable
from modelevents.services.kafka_io import start_producer

__all__ = ["create_app", "ROUTERS"]

log = logging.getLogger("modelevents.gateway")

# One router per concern; the order is the order of /docs.
ROUTERS = (health.router, runs.router, webhooks.router, forwarded.router)

_DESCRIPTION = """\
The edge of modelevents: provider output enters here and leaves as ProviderFrames on the Kafka
`frames` topic, acknowledged by every in-sync replica (acks=all) before any 2xx.

* **Runs** — start a run from a neutral request (routed by capabilities, rendered for the
  provider chosen), read its state and its ModelEvents (SSE, resumable), cancel it.
* **Webhooks** — signed Standard Webhooks deliveries from OpenAI and Gemini.
* **Forwarded frames** — provider streams an application received itself and tees to modelevents.
* **Health** — liveness and readiness (Kafka reachable, topics present).

Any 503 means Kafka did not acknowledge: nothing was kept, send the same request again.
"""


def create_app(config: GatewayConfig, *, manifest: Manifest | None = None) -> FastAPI:
    """The gateway as an ASGI app (serve it with uvicorn: ``modelevents gateway``).

    ``manifest``: the capability manifest the router uses (default: ``config.capabilities``, or
    the shipped ``capabilities.yaml``); read before anything starts, so a bad file stops here.
    """
    manifest = manifest or load_manifest(config.capabilities or MANIFEST_PATH)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        producer = await start_producer(config.kafka)
        gateway = Gateway(config, producer, manifest=manifest)
        gateway.fetcher = Fetcher(config, gateway.publish)
        # Streams: read may wait between frames (a model thinking); connecting may not.
        gateway.http = httpx.AsyncClient(
            timeout=httpx.Timeout(config.call_timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=config.max_provider_connections,
                                max_keepalive_connections=config.max_provider_connections))
        gateway.runs = runs.LocalRuns(config.local_runs)
        gateway.run_states = RunStates(config.kafka)
        await gateway.run_states.start()
        app.state.gateway = gateway
        try:
            yield
        finally:
            await gateway.runs.close()
            await gateway.run_states.stop()
            await gateway.http.aclose()
            await gateway.fetcher.close()
            await producer.stop()

    app = GatewayApp(title="modelevents gateway", version="0.1.0", description=_DESCRIPTION,
                     lifespan=lifespan)
    for router in ROUTERS:
        app.include_router(router)
    app.add_exception_handler(ModelEventsError, _unavailable)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    return app


class GatewayApp(FastAPI):
    """FastAPI, with webhook deliveries — the hot path — answered before FastAPI's middleware
    stack and routing (``webhooks.serve_delivery``: the same code as the documented routes,
    without the per-request machinery, which cost more than the delivery itself in profiles)."""

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        if scope["type"] == "http" and scope["method"] == "POST" and \
                scope["path"].startswith("/webhooks/"):
            gateway = getattr(self.state, "gateway", None)
            if gateway is not None and await webhooks.serve_delivery(gateway, scope, receive, send):
                return
        await super().__call__(scope, receive, send)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    # One error shape across the gateway: {"error": "<what happened and what to do>"}.
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code,
                        headers=exc.headers)


async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    first = errors[0] if errors else {"loc": [], "msg": "invalid"}
    where = ".".join(str(part) for part in first["loc"][1:]) or "body"
    return JSONResponse({"error": f"invalid request: {where}: {first['msg']}"
                                  + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""),
                         "code": "invalid_request", "detail": errors}, status_code=422)


async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning("%s %s: answered 503: %s", request.method, request.url.path, exc)
    status, answer, headers = unavailable(exc)
    return JSONResponse(answer, status_code=status, headers=headers)
