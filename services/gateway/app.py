"""The gateway's ASGI app: ``create_app(config)`` mounts one router per resource (``routes/``).

    health.py     GET /healthz, GET /readyz
    webhooks.py   POST /webhooks/{provider}[/{tenant}]   (Standard Webhooks, OpenAI and Gemini)
    runs.py       POST /v1/runs, GET /v1/runs/{id}[/events|/messages], POST /v1/runs/{id}/cancel
    forwarded_frames.py  POST /v1/runs/{run_id}/frames   (streams an application tees to us)
    forwarded_input.py  POST /v1/runs/{run_id}/input     (the input packet of such a run)
    run_list.py   GET /v1/runs                           (the runs the caller may see, paged)
    event_frames.py  GET /v1/runs/{run_id}/events/{seq}  (one event and its raw frame)
    event_streams.py GET /v1/events?run=…&run=…          (several runs' events on one SSE stream)
    approvals.py  POST /v1/runs/{run_id}/approvals/{id}  (grant/deny → approval.resolved)
    evals.py, decisions.py  GET /v1/evals[/{id}], /v1/decisions[/{id}]  (from their topics)
    ui.py         GET /ui  ·  proxy_*.py  /proxy/{upstream}/… (the providers' own endpoints)

Another resource is one more module of ``routes/`` with an ``APIRouter`` named ``router`` and one
more entry in :data:`ROUTERS`. OpenAPI: ``/openapi.json`` and ``/docs`` (``routes/openapi.py``:
local assets, every error an RFC 9457 problem, ``problems.py``).

The app's lifespan starts what every request shares through ``app.state.gateway``
(``state.py``): one idempotent Kafka producer (acks=all), the fetcher, the HTTP client to the
providers, the capability manifest, the calls in flight, the proxy's frame tee (its journal goes
to Kafka first), the views of ``run-owners``, ``runs``, ``calls`` (``/readyz`` is 503 until they
have read what the topics held), ``eval-results`` and ``decisions``, the shared readers of
followed runs, and takes up the background calls its instance id was polling before it
stopped, or an instance silent for the lease was (``calls/handover.py``); it stops them on shutdown (calls in flight are
cancelled: their frames so far are on Kafka). :class:`KafkaUnavailable` while a request waits
for Kafka is 503 with ``Retry-After``; a client's mistake, a 4xx (``errors.py``).

Every HTTP request first meets :class:`Edge`: the bearer token (``/v1/``), the route's body
limit and the read timeout, each decided before the body is read.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from modelevents.schemas import __version__
from modelevents.schemas.errors import ModelEventsError
from modelevents.services.errors import Unauthorized
from modelevents.services.gateway.auth import token_tenant
from modelevents.services.gateway.calls import handover
from modelevents.services.gateway.calls.capabilities import MANIFEST_PATH, Manifest, load_manifest
from modelevents.services.gateway.calls.fetch import Fetcher
from modelevents.services.gateway.calls.in_flight import LocalRuns
from modelevents.services.gateway.calls.records import CallsView, new_incarnation
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.connections import server_options
from modelevents.services.gateway.errors import problem_of
from modelevents.services.gateway.events.bundles import BundleView
from modelevents.services.gateway.events.decisions import DecisionRecords
from modelevents.services.gateway.events.eval_results import EvalResults
from modelevents.services.gateway.events.followers import RunFollowers
from modelevents.services.gateway.events.owners import RunOwners
from modelevents.services.gateway.events.run_states import RunStates
from modelevents.services.gateway.inputs.deliveries import Deliveries
from modelevents.services.gateway.inputs.packets import InputPackets
from modelevents.services.gateway.metrics import CONTENT_TYPE_LATEST, GatewayMetrics
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.gateway.proxy.hub import ProxyHub
from modelevents.services.gateway.proxy.limits import TenantLimiter
from modelevents.services.gateway.routes import (
    approvals,
    decisions,
    evals,
    event_frames,
    event_streams,
    forwarded_frames,
    forwarded_input,
    health,
    proxy_anthropic,
    proxy_gemini,
    proxy_openai,
    run_list,
    runs,
    ui,
    webhooks,
)
from modelevents.services.gateway.routes.openapi import install_docs
from modelevents.services.gateway.spool.journal import JournalTee, journal_directory
from modelevents.services.gateway.state import Gateway
from modelevents.services.kafka.clients import start_producer
from modelevents.services.policy.hosted import load_policy_file

__all__ = ["create_app", "ROUTERS"]

log = logging.getLogger("modelevents.gateway")

# One router per concern; the order is the order of /docs.
ROUTERS = (health.router, run_list.router, runs.router, event_streams.router, event_frames.router,
           approvals.router, evals.router, decisions.router,
           webhooks.router, forwarded_frames.router, forwarded_input.router,
           proxy_openai.router, proxy_anthropic.router, proxy_gemini.router, ui.router)

_DESCRIPTION = """\
The edge of modelevents: provider output enters here and leaves as ProviderFrames on the Kafka
`frames` topic, acknowledged by every in-sync replica (acks=all) before any 2xx.

* **Runs** — start a run from a neutral request (routed by capabilities, rendered for the
  provider chosen), read its state and its ModelEvents (SSE, resumable), cancel it.
* **Webhooks** — signed Standard Webhooks deliveries from OpenAI and Gemini.
* **Forwarded frames** — provider streams an application received itself and tees to modelevents.
* **Drop-in proxy** — `/proxy/{upstream}/…`: the providers' own endpoints (OpenAI Responses and
  Chat Completions, Claude Messages, Gemini), relayed byte for byte while every frame is teed to
  `frames`; an SDK only changes its base URL (docs/drop-in.md).
* **Evals** — the results of `modelevents eval run`: the hard gates, then the comparison of
  accepted runs (docs/migration.md).
* **Decisions** — the decision records of `modelevents decide`, current or demoted to
  historical evidence by a retest trigger, with the evidence of the demotion.
* **UI** — `/ui`: the operator's page (run list, one run live, eval results, decisions), static
  files of the package.
* **Health** — liveness and readiness (Kafka reachable, topics present, run owners and states
  read).

Any 503 means Kafka did not acknowledge: nothing was kept, send the same request again.
"""


def create_app(config: GatewayConfig, *, manifest: Manifest | None = None) -> GatewayApp:
    """The gateway as an ASGI app (serve it with uvicorn: ``modelevents gateway``).

    ``manifest``: the capability manifest the router uses (default: ``config.capabilities``, or
    the shipped ``capabilities.yaml``); read before anything starts, so a bad file stops here.
    """
    manifest = manifest or load_manifest(config.capabilities or MANIFEST_PATH)
    # The hosted-tool policy, read now too: a bad policy file stops the gateway here.
    hosted_policies = load_policy_file(config.policy) if config.policy else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        producer = await start_producer(config.kafka)
        gateway = Gateway(config, producer, manifest=manifest, hosted_policies=hosted_policies)
        gateway.fetcher = Fetcher(config, gateway.publish)
        gateway.deliveries = Deliveries(config.dedupe_cache_size, config.dedupe_ttl_s)
        # Streams: read may wait between frames (a model thinking); connecting may not.
        gateway.http = httpx.AsyncClient(
            timeout=httpx.Timeout(config.call_timeout_s, connect=10.0),
            limits=httpx.Limits(max_connections=config.max_provider_connections,
                                max_keepalive_connections=config.max_provider_connections))
        gateway.runs = LocalRuns(config.local_runs)
        gateway.packets = InputPackets(config)
        # The read side: the views of whole topics (read from their start; /readyz waits for
        # them) and the shared readers of followed runs.
        gateway.owners = RunOwners(config.kafka)
        gateway.run_states = RunStates(config.kafka)
        # The calls records the replicas share (services/gateway/calls/records.py, handover.py).
        gateway.calls = CallsView(config.kafka)
        # Started by the first request that names a bundle (events/bundles.py).
        gateway.bundles = BundleView(config.kafka)
        gateway.incarnation = new_incarnation()
        gateway.calls.listeners.append(lambda record: handover.nudge_on_cancel(gateway, record))
        gateway.followers = RunFollowers(
            config.kafka, buffer_events=config.follower_buffer_events,
            max_pending=config.follower_queue_events, patience_s=config.follower_patience_s)
        # The proxy's frames: a journal the last process left goes to Kafka before new frames.
        tee = JournalTee(config.journal, journal_directory(config),
                         lambda frames: gateway.publish_all(frames,
                                                            within=config.journal.deadline_s),
                         gateway.kafka_answers, gateway.metrics, fail_closed=config.proxy.fail_closed)
        await tee.start()
        gateway.tee = tee
        # Each tenant's limits; its tokens of the day are summed from every state read of
        # runs, from the topic's start, so the watcher is set before the view starts.
        limiter = TenantLimiter(config.proxy)
        gateway.run_states.watchers.add(limiter.usage.observe)
        gateway.metrics.watch_tenant_tokens(limiter.usage.by_tenant, {
            tenant: limits.tokens_per_day for tenant, limits in config.proxy.tenants.items()
            if limits.tokens_per_day is not None})
        for view in gateway.views:
            await view.start()
        gateway.eval_results = EvalResults(config.kafka)
        await gateway.eval_results.start()
        gateway.decisions = DecisionRecords(config.kafka)
        await gateway.decisions.start()
        app.state.gateway = gateway
        # The drop-in proxy (/proxy/{upstream}/…): its frames reach Kafka through the tee.
        app.state.proxy = ProxyHub(gateway, tee, limiter)
        # This instance's heartbeat; the background calls it was polling before it stopped, and
        # those of instances silent for the lease, taken up.
        taking_up = asyncio.create_task(handover.keep_calls(gateway), name="keep calls")
        if getattr(app, "freeze_after_startup", False):
            # What is alive now (the modules, the views read so far) lives as long as the
            # process: kept out of the collector's full passes, which otherwise stop every
            # stream the gateway relays for tens of ms each.
            gc.collect()
            gc.freeze()
        try:
            yield
        finally:
            taking_up.cancel()
            await asyncio.gather(taking_up, return_exceptions=True)
            await app.state.proxy.close()
            await gateway.runs.close()
            await tee.stop()  # what it holds: to Kafka, or the journal, before the producer stops
            await gateway.followers.close()  # each reader's consumer closed
            for view in gateway.views:
                await view.stop()  # its consumer closed
            await gateway.eval_results.stop()
            await gateway.bundles.stop()
            await gateway.decisions.stop()
            await gateway.http.aclose()
            await gateway.fetcher.close()
            await producer.stop()
            await gateway.deliveries.close()

    app = GatewayApp(title="modelevents gateway", version=__version__, description=_DESCRIPTION,
                     lifespan=lifespan, docs_url=None, redoc_url=None)
    install_docs(app)
    app.edge_config = config
    app.server_options = server_options(config)
    for router in ROUTERS:
        app.include_router(router)
    # One handler: the routes' problems, and what else a request can end with, as problems.
    for raised in (GatewayProblem, ModelEventsError, RequestValidationError,
                   StarletteHTTPException, Exception):
        app.add_exception_handler(raised, answer_problem)
    return app


_UNSERVED = GatewayMetrics()


class GatewayApp(FastAPI):
    """FastAPI behind :class:`Edge` (every HTTP request: token, body size, read timeout), with
    webhook deliveries — the hot path — answered before FastAPI's middleware stack and routing
    (``webhooks.serve_delivery``: the same code as the documented routes, without the
    per-request machinery, which cost more than the delivery itself in profiles)."""

    edge_config: GatewayConfig | None = None  # set by create_app
    # What uvicorn serves it with (services/gateway/connections.py), set by create_app.
    server_options: dict[str, Any] = {}
    # gc.freeze() once started: set by `modelevents gateway`, whose process is the gateway's
    # alone (not by a test or an application serving it beside its own objects).
    freeze_after_startup = False

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or self.edge_config is None:
            await super().__call__(scope, receive, send)
            return
        if scope["path"] == "/metrics" and scope["method"] == "GET":
            await self._metrics(send)
            return
        loop = asyncio.get_running_loop()
        started, status = loop.time(), 500  # 500 unless a response starts

        async def timed_send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await Edge(self.edge_config, scope, receive, timed_send).serve(self._dispatch)
        finally:
            self.metrics.observe_http(scope["path"], scope["method"], status,
                                      loop.time() - started)

    @property
    def metrics(self) -> GatewayMetrics:
        gateway = getattr(self.state, "gateway", None)
        if gateway is None:  # before the lifespan started: counted nowhere that is scraped
            return _UNSERVED
        return gateway.metrics

    async def _metrics(self, send: Any) -> None:
        body = self.metrics.text()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", CONTENT_TYPE_LATEST.encode()),
            (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _dispatch(self, scope, receive, send) -> None:
        if scope["method"] == "POST" and scope["path"].startswith("/webhooks/"):
            gateway = getattr(self.state, "gateway", None)
            if gateway is not None and await webhooks.serve_delivery(gateway, scope, receive, send):
                return
        await super().__call__(scope, receive, send)


def body_limit(config: GatewayConfig, method: str, path: str) -> tuple[int, str]:
    """The largest body a request may send, and the setting that says so (for the 413)."""
    if path.startswith("/webhooks/"):
        return config.max_body_bytes, "max_body_bytes"
    if method == "POST" and path.rstrip("/") == "/v1/runs":
        return config.max_run_request_bytes, "max_run_request_bytes"
    if method == "POST" and path.startswith("/v1/runs/") and path.endswith("/frames"):
        return config.max_forward_bytes, "max_forward_bytes"
    if path.startswith("/proxy/"):
        return config.proxy.max_request_bytes, "proxy.max_request_bytes"
    return config.max_other_body_bytes, "max_other_body_bytes"


class Edge:
    """What every HTTP request meets before any route, as a pure ASGI wrapper of one exchange.

    In order, each before any of the body is read: a ``/v1/`` request without a valid bearer
    token (when ``api_tokens`` are configured) → 401; a ``Content-Length`` that is not a number
    → 400; one above the route's limit (:func:`body_limit`) → 413. Then, while the route reads
    the body: a body that grows past the limit (chunked) → 413 as soon as it does, and a body
    not complete ``read_timeout_s`` after the headers (a client trickling it, or stopped) → 408.
    Those answers close the connection (``connection: close``): what the client still sends is
    never read, and the route, which sees the client gone, frees what it had read; anything it
    tries to answer after that is dropped.
    """

    def __init__(self, config: GatewayConfig, scope: dict, receive: Any, send: Any) -> None:
        self.config = config
        self.scope = scope
        self._receive = receive
        self._send = send
        self.limit, self.limit_name = body_limit(config, scope["method"], scope["path"])
        self.deadline = asyncio.get_running_loop().time() + config.read_timeout_s
        self.size = 0
        self.body_done = False
        self.started = False  # a response (the route's or ours) has begun
        self.refused = False  # the edge answered: the route's answer is dropped

    async def serve(self, app: Any) -> None:
        early = self._check_headers()
        if early is not None:
            await self.refuse(early)
            return
        try:
            await app(self.scope, self.receive, self.send)
        except Exception:
            if not self.refused:
                raise
            # The route failed on the body the edge cut off (a disconnect mid-read): the client
            # has its answer already.
            log.debug("%s %s: route ended after the edge's answer", self.scope["method"],
                      self.scope["path"], exc_info=True)

    def _check_headers(self) -> GatewayProblem | None:
        headers = self.scope["headers"]
        if self.config.api_tokens and self.scope["path"].startswith("/v1/"):
            authorization = next((v.decode("latin-1") for k, v in headers
                                  if k == b"authorization"), "")
            try:
                token_tenant(self.config, authorization)
            except Unauthorized as exc:
                return GatewayProblem(ProblemCode.unauthorized, str(exc))
        declared = next((v for k, v in headers if k == b"content-length"), None)
        if declared is not None:
            if not declared.strip().isdigit():
                return GatewayProblem(ProblemCode.malformed_request,
                                      "Content-Length is not a whole number of bytes")
            if int(declared) > self.limit:
                return self._too_large(f"a body of {int(declared)} bytes")
        return None

    def _too_large(self, what: str) -> GatewayProblem:
        return GatewayProblem(ProblemCode.body_too_large, (
            f"{what} is over this route's limit of {self.limit} bytes ({self.limit_name} in the "
            "gateway config); send a smaller body"))

    async def receive(self) -> dict:
        if self.refused:
            return {"type": "http.disconnect"}
        if self.body_done:
            return await self._receive()  # e.g. an SSE route waiting for the client to leave
        try:
            async with asyncio.timeout_at(self.deadline):
                message = await self._receive()
        except TimeoutError:
            await self.refuse(GatewayProblem(ProblemCode.request_timeout, (
                f"the request body did not arrive within {self.config.read_timeout_s:g} s "
                "(read_timeout_s); send it again, whole and promptly")))
            return {"type": "http.disconnect"}
        if message["type"] == "http.request":
            self.size += len(message.get("body", b""))
            if self.size > self.limit:
                await self.refuse(self._too_large("the body"))
                return {"type": "http.disconnect"}
            self.body_done = not message.get("more_body", False)
        return message

    async def send(self, message: dict) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)

    async def refuse(self, problem: GatewayProblem) -> None:
        """Answer ``problem`` and close, unless a response has begun already."""
        if self.refused:
            return
        self.refused = True
        log.info("%s %s: %d at the edge: %s", self.scope["method"], self.scope["path"],
                 problem.status, problem.detail)
        if self.started:
            return  # too late for a status; the cut body ends the route's work
        self.started = True
        await problem.response({"connection": "close"})(self.scope, self._receive, self._send)


# The handler takes any Exception (Starlette's signature for every handler); create_app
# registers it for each class a request can end with.


async def answer_problem(request: Request, exc: Exception) -> Response:
    """The gateway's one exception handler: ``exc`` answered as its problem (``errors.py``)."""
    if isinstance(exc, StarletteHTTPException):
        exc = _routing_problem(request, exc)
    return problem_of(exc, f"{request.method} {request.url.path}").response()


def _routing_problem(request: Request, exc: StarletteHTTPException) -> Exception:
    """Starlette's and FastAPI's own refusals (an unknown path: 404, a wrong method: 405, a body
    that cannot be parsed: 400) in the gateway's words; any other status is a bug of ours."""
    if exc.status_code == 404:
        return GatewayProblem(ProblemCode.not_found, (
            f"no route {request.method} {request.url.path} on this gateway; its routes are "
            "listed at /docs") if exc.detail == "Not Found" else exc.detail)
    if exc.status_code == 405:
        # Starlette's Allow names the methods of the first route of the path only; a path
        # served by several routes (GET and POST /v1/runs) takes all of theirs.
        allowed = sorted({method for router in ROUTERS for route in router.routes
                          if isinstance(route, Route) and route.path_regex.match(request.url.path)
                          for method in (route.methods or ())} - {"HEAD"})
        headers = {**(exc.headers or {}), **({"Allow": ", ".join(allowed)} if allowed else {})}
        return GatewayProblem(ProblemCode.method_not_allowed, (
            f"{request.url.path} does not take {request.method} (it takes "
            f"{headers.get('Allow', 'another method')}); see /docs"), headers=headers)
    if exc.status_code == 400:
        return GatewayProblem(ProblemCode.malformed_request, exc.detail)
    return exc
