"""Runs the gateway starts and serves: ``/v1/runs``.

    POST /v1/runs                 a neutral request → routed, rendered, sent; 202 with the run id
    GET  /v1/runs/{id}            the run's current RunState (from the ``runs`` topic)
    GET  /v1/runs/{id}/events     the run's ModelEvents as SSE, resumable with Last-Event-ID = seq
    POST /v1/runs/{id}/cancel     ask the provider to cancel (background runs)

The request is checked against the capability manifest before anything is sent (422 naming,
per candidate target, what it lacks); the wire request is rendered from the neutral form only
now, for the target chosen (``adapters/requests``), and carried out by
:class:`~modelevents.services.gateway.runner.CallRunner` in the background. The answer does not
wait for the provider: the run id comes back at once, and everything the provider sends is on
``frames`` and, normalized, on ``events`` and ``runs``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from typing import Any

import httpx
import orjson
from fastapi import APIRouter, Header, HTTPException, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from modelevents.adapters.requests import RenderError, build
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.gateway.router import CapabilityRejected, route
from modelevents.services.gateway.run_views import run_events
from modelevents.services.gateway.runner import CallRunner, ProviderCall
from modelevents.services.gateway.state import gateway_of

__all__ = ["router"]

log = logging.getLogger("modelevents.gateway.runs")

router = APIRouter(tags=["runs"])


@router.post("/v1/runs", status_code=202, summary="Start a run from a neutral request",
             responses={422: {"description": "no target offers what the request requires, or "
                                             "the request is invalid"}})
async def start_run(request: Request) -> JSONResponse:
    gateway = gateway_of(request)
    try:
        neutral = NeutralRequest.model_validate_json(await request.body())
    except ValidationError as exc:
        raise HTTPException(422, detail=orjson.loads(exc.json(include_url=False))) from None
    try:
        target = route(neutral, gateway.manifest)
    except CapabilityRejected as exc:
        return JSONResponse({"error": "capability_rejected", "message": str(exc),
                             "candidates": exc.details()}, status_code=422)
    provider = gateway.config.provider(target.provider)
    if provider is None:
        raise HTTPException(422, detail=f"provider {target.provider!r} is not configured on this "
                                        f"gateway (providers: {', '.join(gateway.config.providers)})")
    try:
        wire = build(neutral, target.api, target.model, stream=not neutral.background,
                     provider=target.provider)
    except RenderError as exc:
        raise HTTPException(422, detail=str(exc)) from None
    run_id = neutral.run_id or f"run_{uuid.uuid4().hex[:24]}"
    call = ProviderCall(
        run_id=run_id, tenant=neutral.tenant or gateway.config.default_tenant, wire=wire,
        background=neutral.background, base_url=provider.base_url,
        api_key=provider.api_key.get_secret_value() if provider.api_key else None)
    runner = CallRunner(call, gateway.http, gateway.publish_all)
    gateway.runs.start(run_id, runner)
    return JSONResponse({"run_id": run_id, "provider": target.provider, "api": target.api,
                         "model": target.model, "background": neutral.background,
                         "state": f"/v1/runs/{run_id}", "events": f"/v1/runs/{run_id}/events"},
                        status_code=202)


@router.get("/v1/runs/{run_id}", summary="The run's current RunState")
async def get_run(run_id: str, request: Request) -> dict[str, Any]:
    gateway = gateway_of(request)
    state = gateway.run_states.get(run_id)
    local = gateway.runs.describe(run_id)
    if state is None and local is None:
        raise HTTPException(404, detail=f"no run {run_id!r} is known to this gateway")
    body: dict[str, Any] = {"run_id": run_id, "state": _state_dict(state)}
    if local is not None:
        body["call"] = local
    return body


@router.get("/v1/runs/{run_id}/events", summary="The run's ModelEvents as Server-Sent Events",
            response_class=StreamingResponse)
async def stream_events(run_id: str, request: Request,
                        last_event_id: str | None = Header(None)) -> StreamingResponse:
    gateway = gateway_of(request)
    try:
        after = int(last_event_id) if last_event_id not in (None, "") else -1
    except ValueError:
        raise HTTPException(400, detail="Last-Event-ID must be the seq of the last event "
                                        "received (a whole number)") from None

    async def body():  # type: ignore[no-untyped-def]
        async for event in run_events(gateway.config.kafka, run_id, after_seq=after):
            if event is None:
                yield b": waiting\n\n"
                continue
            yield _sse(event)

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"cache-control": "no-cache"})


@router.post("/v1/runs/{run_id}/cancel", summary="Ask the provider to cancel the run")
async def cancel_run(run_id: str, request: Request) -> JSONResponse:
    gateway = gateway_of(request)
    runner = gateway.runs.runner(run_id)
    if runner is None:
        raise HTTPException(404, detail=f"run {run_id!r} was not started by this gateway")
    try:
        answer = await runner.cancel()
    except httpx.HTTPError as exc:
        raise HTTPException(502, detail=f"the provider could not be reached: {exc!r}") from None
    if answer is None:
        raise HTTPException(409, detail=f"{runner.call.api} runs cannot be cancelled (or the "
                                        f"provider object is not known yet)")
    return JSONResponse({"run_id": run_id, "requested": True,
                         "provider_status": answer.get("status"),
                         "note": "the run ends cancelled when the provider confirms it"},
                        status_code=202)


def _sse(event: ModelEvent) -> bytes:
    data = orjson.dumps(event.projection(), default=_json_default)
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.kind.encode(), data)


def _state_dict(state: Any) -> dict[str, Any] | None:
    return None if state is None else orjson.loads(orjson.dumps(state))


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(type(value).__name__)


class LocalRuns:
    """The calls this gateway process is carrying out (bounded: finished ones are forgotten
    after ``keep`` newer ones)."""

    def __init__(self, keep: int = 10_000) -> None:
        self.keep = keep
        self._runners: dict[str, CallRunner] = {}
        self._tasks: dict[str, asyncio.Task[Any]] = {}

    def start(self, run_id: str, runner: CallRunner) -> None:
        if run_id in self._runners:
            raise HTTPException(409, detail=f"run {run_id!r} exists already")
        self._runners[run_id] = runner
        task = asyncio.create_task(runner.run(), name=f"run {run_id}")
        self._tasks[run_id] = task
        task.add_done_callback(lambda t: self._done(run_id, t))
        while len(self._runners) > self.keep:
            oldest = next(iter(self._runners))
            if oldest in self._tasks:
                break
            del self._runners[oldest]

    def _done(self, run_id: str, task: asyncio.Task[Any]) -> None:
        self._tasks.pop(run_id, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("run %s failed in the gateway", run_id, exc_info=task.exception())

    def runner(self, run_id: str) -> CallRunner | None:
        return self._runners.get(run_id)

    def describe(self, run_id: str) -> dict[str, Any] | None:
        runner = self._runners.get(run_id)
        if runner is None:
            return None
        outcome = runner.outcome
        return {"provider": runner.call.provider, "api": runner.call.api,
                "model": runner.call.model, "in_flight": run_id in self._tasks,
                "provider_object_id": outcome.object_id, "streams": outcome.streams,
                "resumed": outcome.resumed, "frames": outcome.frames,
                "provider_status": outcome.status, "error": outcome.error, "notes": outcome.notes}

    async def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
