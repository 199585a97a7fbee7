"""Runs the gateway starts and serves: ``/v1/runs``.

    POST /v1/runs                  a neutral request → routed, rendered, sent; 202 with the run id
    GET  /v1/runs/{id}             the run's current RunState (from ``runs``) and its calls here
    GET  /v1/runs/{id}/events      the run's ModelEvents as SSE, resumable with Last-Event-ID = seq
    GET  /v1/runs/{id}/messages    the run so far as neutral messages (to continue the session)
    POST /v1/runs/{id}/cancel      ask the provider to cancel a background call

The request is checked against the capability manifest before anything is sent (422 naming,
per candidate target, what it lacks); the wire request is rendered from the neutral form only
now, for the target chosen (``adapters/requests``), and carried out by
:class:`~modelevents.services.gateway.runner.CallRunner` in the background. The answer does not
wait for the provider: the run id comes back at once, and everything the provider sends is on
``frames`` and, normalized, on ``events`` and ``runs``.

A run spans an agentic turn (DESIGN.md "Run state"): a POST that names the ``run_id`` of a run
this gateway started makes the next provider call of that run — typically the transcript of
``/messages`` plus the tool results, on the same provider or another. Only one call of a run is
in flight at a time (409 otherwise).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from modelevents.adapters.requests import RenderError, build
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.transcript import NeutralRequest, messages_from_events
from modelevents.services.gateway.router import CapabilityRejected, route
from modelevents.services.gateway.run_views import run_events, run_history
from modelevents.services.gateway.runner import (CallRunner, CallTiming, FollowUpFailed,
                                                 ProviderCall)
from modelevents.services.gateway.state import Gateway, gateway_of

__all__ = ["router", "LocalRuns"]

log = logging.getLogger("modelevents.gateway.runs")

router = APIRouter(tags=["runs"])

@router.post(
    "/v1/runs", status_code=202, summary="Start a run (or its next call) from a neutral request",
    responses={202: {"description": "the call is under way; follow `events`"},
               409: {"description": "a call of this run is still in flight"},
               422: {"description": "the request is invalid (`detail` names the field), or no "
                                    "target offers what it requires (`candidates` says what "
                                    "each one lacks)"}})
async def start_run(neutral: NeutralRequest, request: Request) -> JSONResponse:
    gateway = gateway_of(request)
    try:
        target = route(neutral, gateway.manifest)
    except CapabilityRejected as exc:
        return JSONResponse(exc.to_dict(), status_code=422)
    provider = gateway.config.provider(target.provider)
    if provider is None:
        return JSONResponse({"error": "provider_not_configured", "message": (
            f"provider {target.provider!r} is not configured on this gateway; add it under "
            f"providers in the gateway config (configured: "
            f"{', '.join(gateway.config.providers) or 'none'})")}, status_code=422)
    try:
        wire = build(neutral, target.api, target.model, stream=neutral.streams,
                     provider=target.provider)
    except RenderError as exc:
        return JSONResponse({"error": "render_failed", "message": str(exc)}, status_code=422)
    run_id = neutral.run_id or f"run_{uuid.uuid4().hex[:24]}"
    call_tag = gateway.runs.next_tag(run_id)
    call = ProviderCall(
        run_id=run_id, tenant=neutral.tenant or gateway.config.default_tenant, wire=wire,
        call_tag=call_tag, stream=neutral.streams, background=neutral.background,
        base_url=provider.base_url,
        api_key=provider.api_key.get_secret_value() if provider.api_key else None)
    gateway.runs.start(CallRunner(call, gateway.http, gateway.publish_all, _timing(gateway)))
    log.info("run %s call %s → %s/%s/%s%s", run_id, call_tag, target.provider, target.api,
             target.model, " (background)" if neutral.background else "")
    return JSONResponse({
        "run_id": run_id, "call": call_tag, "provider": target.provider, "api": target.api,
        "model": target.model, "background": neutral.background, "stream": neutral.streams,
        "preferred_met": list(target.preferred_met),
        "links": {"state": f"/v1/runs/{run_id}", "events": f"/v1/runs/{run_id}/events",
                  "messages": f"/v1/runs/{run_id}/messages",
                  "cancel": f"/v1/runs/{run_id}/cancel"}}, status_code=202)


@router.get("/v1/runs/{run_id}", summary="The run's current RunState",
            responses={404: {"description": "no such run on `runs`, nor started here"}})
async def get_run(run_id: str, request: Request) -> dict[str, Any]:
    """``state``: the latest RunState on the ``runs`` topic (null until the processor wrote one);
    ``calls``: the provider calls this gateway process made for the run, newest last."""
    gateway = gateway_of(request)
    state = gateway.run_states.get(run_id)
    calls = gateway.runs.describe(run_id)
    if state is None and not calls:
        raise HTTPException(404, detail=f"no run {run_id!r}: not on the runs topic and not "
                                        "started by this gateway")
    return {"run_id": run_id, "state": _jsonable(state), "calls": calls}


@router.get(
    "/v1/runs/{run_id}/events", summary="The run's ModelEvents as Server-Sent Events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": (
        "one SSE event per ModelEvent: `id` = seq, `event` = kind, `data` = the JSON "
        "projection (as `modelevents normalize` prints it); comments keep the connection alive")},
        400: {"description": "Last-Event-ID / after is not a seq"}})
async def stream_events(run_id: str, request: Request,
                        last_event_id: str | None = Header(None),
                        after: int | None = Query(None, description="send events with seq > after"
                                                  " (as Last-Event-ID; the header wins)"),
                        follow: bool = Query(True, description="wait for events to come until "
                                             "run.finished; false: only what is there now")
                        ) -> StreamingResponse:
    """Each event once, in ``seq`` order, from ``seq`` 0 or after the one named; the stream ends
    after ``run.finished`` (or, with ``follow=false``, at the end of what ``events`` holds)."""
    gateway = gateway_of(request)
    if last_event_id not in (None, ""):
        try:
            after = int(last_event_id)
        except ValueError:
            raise HTTPException(400, detail="Last-Event-ID must be the seq of the last event "
                                            "received (a whole number)") from None
    start_after = after if after is not None else -1

    async def body():  # type: ignore[no-untyped-def]
        source = (run_events(gateway.config.kafka, run_id, after_seq=start_after) if follow
                  else run_history(gateway.config.kafka, run_id, after_seq=start_after))
        async for event in source:
            if event is None:
                yield b": waiting\n\n"
                continue
            yield _sse(event)

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"cache-control": "no-cache", "x-accel-buffering": "no"})


@router.get("/v1/runs/{run_id}/messages", summary="The run so far as neutral messages",
            responses={404: {"description": "no events for this run"}})
async def get_messages(run_id: str, request: Request) -> dict[str, Any]:
    """The provider calls of the run that ended (awaiting tool results, or finished) as neutral
    messages — assistant text, tool calls with ``tool_name`` and ``tool_call_id``, reasoning with
    its origin — plus the tool results on ``events``. Append the next user message or tool
    results and POST it to ``/v1/runs`` (with this ``run_id`` to continue the same turn), on any
    provider: signatures go back only to the model that made them."""
    gateway = gateway_of(request)
    events = [e async for e in run_history(gateway.config.kafka, run_id) if e is not None]
    if not events:
        raise HTTPException(404, detail=f"no events for run {run_id!r} on "
                                        f"{gateway.config.kafka.topic('events')}")
    return {"run_id": run_id, "events": len(events),
            "messages": [m.model_dump(mode="json", exclude_none=True)
                         for m in messages_from_events(events)]}


@router.post("/v1/runs/{run_id}/cancel", status_code=202,
             summary="Ask the provider to cancel the run's background call",
             responses={404: {"description": "no call of this run here"},
                        409: {"description": "the call cannot be cancelled (not a background "
                                             "call, or the provider object is not known yet)"},
                        502: {"description": "the provider refused or could not be reached"}})
async def cancel_run(run_id: str, request: Request) -> JSONResponse:
    """The run ends ``cancelled`` only when the provider confirms it: watch ``events``."""
    gateway = gateway_of(request)
    runner = gateway.runs.latest(run_id)
    if runner is None:
        raise HTTPException(404, detail=f"run {run_id!r} has no call made by this gateway")
    if not runner.cancellable:
        raise HTTPException(409, detail=f"{runner.call.api} call {runner.call.call_tag} is not a "
                                        "background call; only background calls can be cancelled")
    try:
        answer = await runner.cancel()
    except FollowUpFailed as exc:
        raise HTTPException(502, detail=str(exc)) from None
    if answer is None:
        raise HTTPException(409, detail="the provider object is not known yet; try again in a "
                                        "moment")
    return JSONResponse({"run_id": run_id, "call": runner.call.call_tag, "requested": True,
                         "provider_status": answer.get("status"),
                         "note": "the run ends cancelled when the provider confirms it"},
                        status_code=202)


def _timing(gateway: Gateway) -> CallTiming:
    config = gateway.config
    return CallTiming(poll_initial=config.poll_initial_s, poll_max=config.poll_max_s,
                      terminal_timeout=config.terminal_timeout_s, attempts=config.call_attempts,
                      backoff=config.call_backoff_s)


def _sse(event: ModelEvent) -> bytes:
    data = orjson.dumps(event.projection(), default=_json_default)
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.kind.encode(), data)


def _jsonable(value: Any) -> Any:
    return None if value is None else orjson.loads(orjson.dumps(value, default=_json_default))


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(type(value).__name__)


@dataclass
class _RunCalls:
    runners: list[CallRunner] = field(default_factory=list)
    task: asyncio.Task[Any] | None = None  # the call in flight


class LocalRuns:
    """The calls this gateway process made, per run (bounded: the runs of the oldest finished
    calls are forgotten beyond ``keep``; their state stays on ``runs``)."""

    def __init__(self, keep: int = 10_000) -> None:
        self.keep = keep
        self._runs: dict[str, _RunCalls] = {}

    def next_tag(self, run_id: str) -> str:
        """The tag of the run's next call; 409 while a call of the run is in flight."""
        calls = self._runs.get(run_id)
        if calls is not None and calls.task is not None:
            raise HTTPException(409, detail=f"call {calls.runners[-1].call.call_tag} of run "
                                            f"{run_id!r} is still in flight; wait for it to end "
                                            "(GET the run) before sending its next call")
        # A random part: another gateway process (or this one after a restart) may have made
        # calls of the same run, and frame ids must never collide within a run.
        count = len(calls.runners) if calls is not None else 0
        return f"c{count}-{uuid.uuid4().hex[:8]}"

    def start(self, runner: CallRunner) -> None:
        run_id = runner.call.run_id
        calls = self._runs.pop(run_id, None) or _RunCalls()
        self._runs[run_id] = calls  # most recently used last
        calls.runners.append(runner)
        calls.task = asyncio.create_task(runner.run(), name=f"run {run_id} {runner.call.call_tag}")
        calls.task.add_done_callback(lambda task: self._done(calls, task))
        excess = len(self._runs) - self.keep
        for old in [k for k, c in self._runs.items() if c.task is None][:max(0, excess)]:
            del self._runs[old]

    def _done(self, calls: _RunCalls, task: asyncio.Task[Any]) -> None:
        if calls.task is task:
            calls.task = None
        if not task.cancelled() and task.exception() is not None:
            log.error("a call failed in the gateway", exc_info=task.exception())

    def latest(self, run_id: str) -> CallRunner | None:
        calls = self._runs.get(run_id)
        return calls.runners[-1] if calls is not None else None

    def describe(self, run_id: str) -> list[dict[str, Any]]:
        calls = self._runs.get(run_id)
        if calls is None:
            return []
        out = []
        for runner in calls.runners:
            outcome = runner.outcome
            out.append({
                "call": runner.call.call_tag, "provider": runner.call.provider,
                "api": runner.call.api, "model": runner.call.model,
                "background": runner.call.background, "stream": runner.call.stream,
                "in_flight": runner is calls.runners[-1] and calls.task is not None,
                "provider_object_id": outcome.object_id, "provider_status": outcome.status,
                "streams": outcome.streams, "resumed": outcome.resumed, "polls": outcome.polls,
                "frames": outcome.frames, "error": outcome.error, "notes": outcome.notes})
        return out

    async def close(self) -> None:
        tasks = [c.task for c in self._runs.values() if c.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
