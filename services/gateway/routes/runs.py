"""Runs the gateway starts and serves: ``/v1/runs``.

    POST /v1/runs                  a neutral request → routed, rendered, sent; 202 with the run id
    GET  /v1/runs/{id}             the run's current RunState (from ``runs``) and its calls here
    GET  /v1/runs/{id}/events      the run's ModelEvents as SSE, resumable with Last-Event-ID = seq
    GET  /v1/runs/{id}/messages    the whole transcript: the input packet's, then the model's
    POST /v1/runs/{id}/cancel      ask the provider to cancel a background call
    POST /v1/runs/{id}/reconcile   read a live run's provider object back until it ends
                                   (?take_over=true: a call another gateway instance left)

A request is checked against the capability manifest and the tenant's policy, its input packet
is written, and the call is carried out in the background: the run id comes back at once.
What replicas share, how a run is reconciled and who owns a run id are in the notes.

More on this module: docs/gateway-api.md, ``services/gateway/routes/runs.py``.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable
from contextlib import aclosing
from typing import Any

import orjson
from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from modelevents.adapters.errors import RenderError
from modelevents.adapters.registry import api_facts
from modelevents.adapters.requests import WireRequest, build
from modelevents.schemas.errors import InvalidId
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.ids import check_id
from modelevents.schemas.run_input import RunInput
from modelevents.schemas.run_state import TERMINAL_RUN_STATES, RunState
from modelevents.schemas.transcript import NeutralRequest, messages_from_events
from modelevents.services.errors import CapabilityRejected, FollowUpFailed
from modelevents.services.gateway.auth import caller_tenant, may_see
from modelevents.services.gateway.calls import handover, idempotency
from modelevents.services.gateway.calls.bundled import apply_bundle
from modelevents.services.gateway.calls.records import ENDED, CallRecord, KeyRecord
from modelevents.services.gateway.calls.router import Route, admit, route
from modelevents.services.gateway.calls.runner import CallRunner, ProviderCall
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.events.followers import json_default, sse_event
from modelevents.services.gateway.events.run_states import run_history
from modelevents.services.gateway.inputs.packets import InputPackets, latest_packet, packet_summary
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.gateway.proxy.identity import Refused
from modelevents.services.gateway.proxy.limits import Slot, TenantLimiter
from modelevents.services.gateway.routes.health import readiness
from modelevents.services.gateway.state import Gateway

__all__ = ["router", "known_run"]

log = logging.getLogger("modelevents.gateway.runs")

router = APIRouter(tags=["runs"])

MAX_IDEMPOTENCY_KEY = 255
MAX_CORRELATION_ID = 255


@router.post(
    "/v1/runs", status_code=202, summary="Start a run (or its next call) from a neutral request",
    responses={202: {"description": "the call is under way; follow `links.events`"},
               401: {"description": "a bearer token is required (api_tokens configured)"},
               404: {"description": "`run_id` is another tenant's: nothing was sent"},
               409: {"description": "a call of this run is in flight, or the run ended"},
               422: {"description": "the request is invalid (`detail` names the field; an "
                                    "invalid `run_id`: code `invalid_id`), no "
                                    "target offers what it requires (`candidates`: what each "
                                    "one lacks), a hosted tool is refused by the tenant's "
                                    "policy or cannot be enforced (code `egress_rejected`: "
                                    "`candidates[].refused`), or an Idempotency-Key was "
                                    "reused"},
               429: {"description": "too many calls in flight (busy), or over the tenant's "
                                   "limits (rate_limited, budget_exhausted: proxy.tenants); "
                                   "retry after Retry-After"},
               503: {"description": "Kafka is not ready: nothing was sent to a provider"}})
async def start_run(neutral: NeutralRequest, request: Request, gateway: RunningGateway,
                    idempotency_key: str | None = Header(None, max_length=MAX_IDEMPOTENCY_KEY),
                    x_correlation_id: str | None = Header(None, max_length=MAX_CORRELATION_ID)
                    ) -> Response:
    tenant = caller_tenant(request, neutral.tenant)
    if neutral.run_id is not None:
        try:
            check_id(neutral.run_id)
        except InvalidId as exc:
            raise GatewayProblem(ProblemCode.invalid_id, str(exc)) from None
    claim = None
    if idempotency_key is not None:
        digest = hashlib.sha256(neutral.model_dump_json().encode()).hexdigest()
        earlier = await idempotency.answer_or_claim(gateway, tenant, idempotency_key, digest)
        if isinstance(earlier, Response):
            return earlier
        claim = earlier
    answered = False
    try:
        answer = await _start(gateway, request.app.state.proxy.limiter, neutral, tenant, claim,
                              x_correlation_id)
        answered = answer.status_code == 202
        return answer
    finally:
        if claim is not None and not answered:
            await idempotency.release(gateway, claim)


async def _start(gateway: Gateway, limiter: TenantLimiter, neutral: NeutralRequest,
                 tenant: str, claim: KeyRecord | None, correlation_id: str | None = None
                 ) -> Response:
    config = gateway.config
    policy = gateway.hosted_policy(tenant)
    if neutral.bundle is not None:
        neutral = await _under_bundle(gateway, neutral)
    try:
        # What is rendered, recorded and sent is the request under the tenant's policy.
        neutral = admit(neutral, policy)
        target = route(neutral, gateway.manifest,
                       config.run_providers(gateway.manifest.providers()), policy)
    except CapabilityRejected as exc:
        code = ProblemCode.egress_rejected if exc.egress else ProblemCode.capability_rejected
        raise GatewayProblem(code, str(exc), candidates=exc.details()) from None
    try:
        wire = build(neutral, target.api, target.model, stream=neutral.streams,
                     provider=target.provider)
    except RenderError as exc:
        raise GatewayProblem(ProblemCode.render_failed, str(exc)) from None
    run_id = neutral.run_id or f"run_{uuid.uuid4().hex[:24]}"
    if gateway.owner_of(run_id) not in (None, tenant):
        raise _not_yours(run_id)  # known already: refused before anything else is asked
    if gateway.runs.in_flight >= config.max_calls_in_flight:
        raise GatewayProblem(ProblemCode.busy, f"{config.max_calls_in_flight} provider calls "
                             "are in flight on this gateway; retry shortly")
    # The tenant's limits (proxy.tenants), as its proxied calls have: the slot is the call's
    # until it ends.
    try:
        slot = limiter.admit(tenant, create=True)
    except Refused as exc:
        raise GatewayProblem(exc.code, exc.message, headers=exc.headers) from None
    try:
        return await _call(gateway, neutral, tenant, claim, correlation_id, target, wire, run_id,
                           slot)
    except BaseException:
        slot.release()
        raise


async def _under_bundle(gateway: Gateway, neutral: NeutralRequest) -> NeutralRequest:
    """The request with what it leaves out taken from its bundle (calls/bundled.py): 422
    unknown_bundle when no bundle has its id, bundle_mismatch when it contradicts it."""
    bundle_id = neutral.bundle
    assert bundle_id is not None
    stored = await gateway.bundles.find(bundle_id, gateway.config.ack_timeout_s)
    if stored is None:
        raise GatewayProblem(ProblemCode.unknown_bundle, f"no bundle {bundle_id} on "
                             f"{gateway.bundles.topic}: create it with `modelevents bundle "
                             "create FILE` (`modelevents bundle list` lists them)",
                             bundle=bundle_id)
    return apply_bundle(neutral, stored.bundle)


async def _call(gateway: Gateway, neutral: NeutralRequest, tenant: str,
                claim: KeyRecord | None, correlation_id: str | None, target: Route,
                wire: WireRequest, run_id: str, slot: Slot) -> Response:
    """The run's call begun, once the tenant's limits let it (``slot``: released when the call
    ends)."""
    config = gateway.config
    # The views may be read still (a gateway just started): wait as a claim would.
    status, ready = await readiness(gateway, views_wait=config.ack_timeout_s)
    if status != 200:
        raise GatewayProblem(ProblemCode.kafka_unavailable, f"Kafka is not ready, so nothing "
                             f"was sent to the provider: {ready.get('reason')}")
    if not await gateway.claim_run(run_id, tenant, fresh=neutral.run_id is None):
        raise _not_yours(run_id)
    state = _owned_state(gateway, run_id, tenant)
    if state is not None and state.status in TERMINAL_RUN_STATES:
        raise GatewayProblem(ProblemCode.run_ended, f"run {run_id!r} ended {state.status}; a new "
                             "turn is a new run (omit run_id, or choose another)")
    provider = config.provider(target.provider)
    if provider is None:  # route() chose among the configured providers only
        raise RuntimeError(f"provider {target.provider!r} routed to but not configured")
    call = ProviderCall(
        run_id=run_id, tenant=tenant, wire=wire, call_tag=gateway.runs.next_tag(run_id),
        stream=neutral.streams, background=neutral.background, base_url=provider.base_url,
        bundle=neutral.bundle,
        api_key=provider.api_key.get_secret_value() if provider.api_key else None)
    # The run's call in flight on every replica (409 while another one is), then the input
    # packet and the key's answer, each acknowledged (KafkaUnavailable → 503 with nothing
    # sent): a call the gateway makes always has its packet, and a retry never sends it again.
    await handover.begin_call(gateway, call)
    links = {"state": f"/v1/runs/{run_id}", "events": f"/v1/runs/{run_id}/events",
             "messages": f"/v1/runs/{run_id}/messages", "cancel": f"/v1/runs/{run_id}/cancel"}
    try:
        packet = gateway.packets.packet(
            neutral, run_id=run_id, tenant=tenant, call=call.call_tag, provider=target.provider,
            api=target.api, model=target.model, correlation_id=correlation_id)
        await gateway.publish_input(packet)
        answer = {"run_id": run_id, "call": call.call_tag, "provider": target.provider,
                  "api": target.api, "model": target.model, "background": neutral.background,
                  "stream": neutral.streams, "preferred_met": list(target.preferred_met),
                  "input_fingerprint": packet.fingerprint, "links": links}
        if neutral.bundle is not None:
            answer["bundle"] = neutral.bundle
        if neutral.hosted_tools:
            # As sent: with the tenant's domain rules merged in (the caller sees the narrowing).
            answer["hosted_tools"] = [t.model_dump(mode="json") for t in neutral.hosted_tools]
        if claim is not None:
            await idempotency.remember(gateway, claim, answer)
    except BaseException as exc:
        await handover.update_call(gateway, run_id, call.call_tag, state=ENDED,
                                   note=f"not sent: {exc}")
        raise
    runner = CallRunner(call, gateway.http, gateway.publish_all, handover.timing(gateway))
    gateway.runs.start(runner, _run_and_record(gateway, runner, packet, slot))
    log.info("run %s call %s → %s/%s/%s%s", run_id, call.call_tag, target.provider, target.api,
             target.model, " (background)" if neutral.background else "", extra=call.log_fields)
    return JSONResponse(answer, status_code=202, headers={"Location": links["state"]})


async def _run_and_record(gateway: Gateway, runner: CallRunner, packet: RunInput,
                          slot: Slot) -> None:
    """Carry out the call, then write its packet again with what the call learned (best effort:
    the packet of revision 0 stands when Kafka does not take it)."""
    try:
        await handover.carry_out(gateway, runner, runner.run())
    finally:
        slot.release()
        try:
            await gateway.publish_input(InputPackets.after_call(
                packet, runner.outcome.object_id, runner.cursor))
        except Exception as exc:
            log.warning("run %s: the input packet's last revision was not written: %s",
                        packet.run_id, exc, extra=runner.call.log_fields)


@router.get("/v1/runs/{run_id}", summary="The run's current RunState",
            responses={404: {"description": "no such run on `runs`, nor started here"},
                       503: {"description": "the gateway is still reading `runs` (just started)"}})
async def get_run(run_id: str, request: Request, gateway: RunningGateway) -> dict[str, Any]:
    """``state``: the latest RunState on the ``runs`` topic (null until the processor wrote one);
    ``calls``: the provider calls this gateway process made for the run, newest last (another
    gateway process of a deployment knows its own); ``call_record``: the run's latest call as
    every replica knows it (the ``calls`` topic: its gateway instance, provider object,
    ``in_flight`` / ``cancel_requested`` / ``ended``), null for a run no gateway called."""
    state, owner = known_run(gateway, request, run_id)
    record = gateway.calls.call(run_id)
    return {"run_id": run_id, "state": _jsonable(state), "calls": gateway.runs.describe(run_id),
            "call_record": record.describe() if record is not None and record.tenant == owner
            else None}


@router.get(
    "/v1/runs/{run_id}/events", summary="The run's ModelEvents as Server-Sent Events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": (
        "one SSE event per ModelEvent: `id` = seq, `event` = kind, `data` = the JSON "
        "projection (as `modelevents normalize` prints it); comments keep the connection alive")},
        204: {"description": "the run ended and every event was sent already"},
        400: {"description": "Last-Event-ID / after is not a seq"},
        404: {"description": "no such run"}})
async def stream_events(run_id: str, request: Request, gateway: RunningGateway,
                        last_event_id: str | None = Header(None),
                        after: int | None = Query(None, description="send events with seq > after"
                                                  " (as Last-Event-ID; the header wins)"),
                        follow: bool = Query(True, description="wait for events to come until "
                                             "run.finished; false: only what is there now")
                        ) -> Response:
    """Each event once, in ``seq`` order, from ``seq`` 0 or after the one named; the stream ends
    after ``run.finished`` (or, with ``follow=false``, at the end of what ``events`` holds).
    A reconnect after the end (EventSource does that) is answered 204, which stops it."""
    if last_event_id not in (None, ""):
        try:
            after = int(last_event_id)
        except ValueError:
            raise GatewayProblem(ProblemCode.malformed_request, "Last-Event-ID must be the seq "
                                 "of the last event received (a whole number)") from None
    after = -1 if after is None else after
    if after < -1:
        raise GatewayProblem(ProblemCode.malformed_request, "Last-Event-ID / after must be -1 "
                             "(from the start) or a seq")
    state, owner = known_run(gateway, request, run_id)
    if state is not None and state.status in TERMINAL_RUN_STATES and after >= state.last_seq:
        return Response(status_code=204)
    return StreamingResponse(_event_stream(gateway, run_id, owner, after, follow),
                             media_type="text/event-stream",
                             headers={"cache-control": "no-cache", "x-accel-buffering": "no"})


@router.get("/v1/runs/{run_id}/messages", summary="The run's whole transcript: what it was "
            "asked (its input packet), then what the model said",
            responses={404: {"description": "no input packet and no events for this run"}})
async def get_messages(run_id: str, request: Request,
                       gateway: RunningGateway) -> dict[str, Any]:
    """``messages``: the request's side first — the transcript of the run's latest input packet
    (``run-inputs``: the call's request as the gateway recorded it, redacted), its
    ``instructions`` beside — then the model's side: the provider calls from that packet's call
    on, as neutral assistant messages (text, tool calls with ``tool_name`` and ``tool_call_id``,
    reasoning with its origin) and the ``tool.result`` events as tool messages. ``sides`` says
    how many messages each side has. A run with no packet (fed, or forwarded without one) has
    only the model's side, and ``input`` is null. To continue the turn, POST these messages and
    the next results or question with this ``run_id``, on any provider — signatures go back only
    to the model that made them."""
    _state, owner = known_run(gateway, request, run_id)
    packet = await latest_packet(gateway.config.kafka, run_id, owner)
    events = [e async for e in run_history(gateway.config.kafka, run_id, owner)]
    if not events and packet is None:
        raise GatewayProblem(ProblemCode.not_found, f"no input packet and no events for run "
                             f"{run_id!r} on {gateway.config.kafka.topic('events')} yet")
    asked: list[dict[str, Any]] = []
    instructions = None
    if packet is not None:
        doc = packet.request_doc()
        # As the model's side is shown: without the fields left unset.
        asked = _without_none(doc.get("transcript") or [])
        instructions = doc.get("instructions")
        events = _from_call(events, packet.call)
    answered = [m.model_dump(mode="json", exclude_none=True)
                for m in messages_from_events(events)]
    return {"run_id": run_id, "events": len(events), "instructions": instructions,
            "input": packet_summary(packet) if packet is not None else None,
            "sides": {"request": len(asked), "model": len(answered)},
            "messages": asked + answered}


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def _from_call(events: list[ModelEvent], call: str) -> list[ModelEvent]:
    """The events from the first one of ``call`` on (its frames' ids start with the call tag or
    stream id and ``.`` or ``:``): what earlier calls said is in the packet's transcript."""
    for index, event in enumerate(events):
        frame_id = event.source.frame_id
        if frame_id.startswith(call) and frame_id[len(call):len(call) + 1] in (".", ":"):
            return events[index:]
    return []


@router.post("/v1/runs/{run_id}/cancel", status_code=202,
             summary="Ask the provider to cancel the run's background call",
             responses={404: {"description": "no call of this run on any gateway"},
                        409: {"description": "not a background call, its provider object is "
                                             "not known yet, or it ended already"},
                        502: {"description": "the provider refused or could not be reached"}})
async def cancel_run(run_id: str, request: Request, gateway: RunningGateway) -> JSONResponse:
    """The run ends ``cancelled`` only when the provider confirms it: watch ``events``. A call
    another replica polls is cancelled by the provider object its calls record names; that
    replica polls at once."""
    _check_path_id(run_id)
    runner = gateway.runs.latest(run_id)
    record = gateway.calls.call(run_id)
    if runner is None or (record is not None and record.call != runner.call.call_tag
                          and handover.in_flight_elsewhere(gateway, record)):
        return await _cancel_elsewhere(gateway, request, run_id, record)
    if not may_see(request, runner.call.tenant):
        raise _no_call(run_id)
    call = runner.call
    if not runner.cancellable:
        raise _not_background(call.api, call.call_tag)
    if runner.outcome.completed:
        raise GatewayProblem(ProblemCode.conflict, f"call {call.call_tag} already ended: the "
                             f"provider says {runner.outcome.status!r}")
    answer = await _cancelled(run_id, call, runner.cancel())
    if not gateway.runs.busy(run_id) and not runner.outcome.completed:
        gateway.runs.settle(runner)  # the call's polling had ended: follow the cancel to its end
    return _cancel_answer(run_id, call.call_tag, answer)


async def _cancel_elsewhere(gateway: Gateway, request: Request, run_id: str,
                            record: CallRecord | None) -> JSONResponse:
    if record is None or not may_see(request, record.tenant):
        raise _no_call(run_id)
    if not record.background or api_facts(record.api).follow_up.cancel is None:
        raise _not_background(record.api, record.call)
    if not record.in_flight:
        raise GatewayProblem(ProblemCode.conflict, f"call {record.call} already ended")
    answer = await _cancelled(run_id, None, handover.cancel_elsewhere(gateway, record))
    return _cancel_answer(run_id, record.call, answer)


def _no_call(run_id: str) -> GatewayProblem:
    return GatewayProblem(ProblemCode.not_found, f"run {run_id!r} has no call made by a gateway")


def _not_background(api: str, call_tag: str) -> GatewayProblem:
    return GatewayProblem(ProblemCode.conflict, f"{api} call {call_tag} is not a background "
                          "call; only background calls can be cancelled")


async def _cancelled(run_id: str, call: ProviderCall | None,
                     asked: Awaitable[dict[str, Any] | None]) -> dict[str, Any]:
    """The provider's answer to a cancel; 409 while its object is not known yet, 502 when it
    refused, 503 when its answer could not be written to Kafka."""
    try:
        answer = await asked
    except FollowUpFailed as exc:
        raise GatewayProblem(ProblemCode.provider_error, str(exc)) from None
    except GatewayProblem:
        raise
    except Exception as exc:
        log.warning("run %s: cancel asked, its answer not published: %s", run_id, exc,
                    extra=call.log_fields if call is not None else {"run_id": run_id})
        raise GatewayProblem(ProblemCode.kafka_unavailable, (
            f"the provider was asked to cancel, but its answer could not be written to Kafka "
            f"({exc}); the run's next poll shows the outcome")) from None
    if answer is None:
        raise GatewayProblem(ProblemCode.conflict, "the provider object is not known yet; try "
                             "again in a moment")
    return answer


def _cancel_answer(run_id: str, call_tag: str, answer: dict[str, Any]) -> JSONResponse:
    return JSONResponse({"run_id": run_id, "call": call_tag, "requested": True,
                         "provider_status": answer.get("status"),
                         "note": "the run ends cancelled when the provider confirms it"},
                        status_code=202)


@router.post("/v1/runs/{run_id}/reconcile", status_code=202,
             summary="Read the run's provider object back until the provider says it ended",
             responses={404: {"description": "no such run"},
                        409: {"description": "the run ended, a call of it is in flight on a "
                                             "gateway (without take_over), or its API has no "
                                             "object to read back"},
                        422: {"description": "the run's provider is not configured here"}})
async def reconcile_run(run_id: str, request: Request, gateway: RunningGateway,
                        take_over: bool = Query(False, description=(
                            "take the run's call in flight on another gateway instance over "
                            "(that instance is gone for good): it stops polling if it is alive"))
                        ) -> JSONResponse:
    """For a run left in progress (the gateway restarted while polling it, the polling timed out,
    a stream was cut): the provider's object — the last one the run's events named — is polled
    to its end and published, so the run ends as the provider says. A call another gateway
    polls is refused (409: two gateways never poll one call) unless ``take_over``."""
    state, _owner = known_run(gateway, request, run_id)
    if state is None:
        raise GatewayProblem(ProblemCode.conflict, f"run {run_id!r} has no state on the runs "
                             "topic yet; nothing to reconcile")
    if state.status in TERMINAL_RUN_STATES:
        raise GatewayProblem(ProblemCode.conflict, f"run {run_id!r} ended {state.status}; "
                             "nothing to reconcile")
    if state.api not in handover.READ_BACK_APIS or not state.provider_object_ids:
        raise GatewayProblem(ProblemCode.conflict, (
            f"run {run_id!r} ({state.api}) names no provider object that can be read back (only "
            "OpenAI Responses and Gemini Interactions objects can)"))
    current = gateway.calls.call(run_id)
    in_flight = handover.in_flight_elsewhere(gateway, current)
    if in_flight and not take_over:
        raise handover.conflict(current)  # type: ignore[arg-type]
    object_id = state.provider_object_ids[-1]
    record = CallRecord(run_id=run_id, tenant=state.tenant, rev=0, call="", instance="",
                        incarnation="", provider=state.provider or "", api=state.api,
                        model=state.model or "", background=True, stream=False,
                        object_id=object_id)
    runner = handover.read_back_runner(gateway, record, gateway.runs.next_tag(run_id))
    await handover.begin_call(gateway, runner.call, object_id=object_id,
                              supersede=current.call if in_flight and current else None,
                              note="reconcile" + (" (taken over)" if in_flight else ""))
    gateway.runs.start(runner, handover.carry_out(gateway, runner, runner.settle()))
    log.info("run %s: reconciling %s %s", run_id, state.api, object_id,
             extra=runner.call.log_fields)
    return JSONResponse({"run_id": run_id, "call": runner.call.call_tag,
                         "provider_object_id": object_id,
                         "note": "the run ends as the provider says; watch its events"},
                        status_code=202, headers={"Location": f"/v1/runs/{run_id}"})


def known_run(gateway: Gateway, request: Request, run_id: str) -> tuple[RunState | None, str]:
    """The run's state (None before the processor wrote one, or when the latest state on
    ``runs`` is another tenant's) and its owner; 422 for an invalid id, 404 for a run nobody
    owns or the caller may not see, 503 while the gateway has not read ``runs`` and
    ``run-owners`` up to their ends yet."""
    _check_path_id(run_id)
    owner = gateway.owner_of(run_id)
    if owner is None:
        runner = gateway.runs.latest(run_id)
        owner = runner.call.tenant if runner is not None else None
    # An owner found is final (a claim never changes); none found means nobody's only once
    # the views have read their topics.
    if owner is None and not gateway.views_caught_up():
        raise GatewayProblem(ProblemCode.unavailable, "this gateway is still reading the runs "
                             "and run-owners topics; retry in a moment")
    if owner is None or not may_see(request, owner):
        raise GatewayProblem(ProblemCode.not_found, f"no run {run_id!r}: not on the runs topic "
                             "and not started by this gateway")
    return _owned_state(gateway, run_id, owner), owner


def _owned_state(gateway: Gateway, run_id: str, owner: str) -> RunState | None:
    # Every record is authorized, not only the request: a state of another tenant under the
    # owner's run id (written before run ids had owners) is not the owner's run.
    state = gateway.run_states.get(run_id)
    return state if state is not None and state.tenant == owner else None


def _check_path_id(run_id: str) -> None:
    try:
        check_id(run_id)
    except InvalidId as exc:
        raise GatewayProblem(ProblemCode.invalid_input, str(exc)) from None


def _not_yours(run_id: str) -> GatewayProblem:
    # The same answer as for a run that does not exist: an id of another tenant says nothing.
    return GatewayProblem(ProblemCode.run_not_found, f"no run {run_id!r}: not on the runs topic "
                          "and not started by this gateway; choose another run id (or omit it)")


async def _event_stream(gateway: Gateway, run_id: str, owner: str, after: int,
                        follow: bool) -> AsyncIterator[bytes]:
    """The SSE body: followers share the run's one reader; ``follow=false`` reads what
    ``events`` holds now on its own (it ends soon)."""
    if follow:
        source = gateway.followers.follow(run_id, owner, after)
        async with aclosing(source) as chunks:
            async for chunk in chunks:
                yield chunk
        return
    async with aclosing(run_history(gateway.config.kafka, run_id, owner,
                                    after_seq=after)) as events:
        async for event in events:
            yield sse_event(event)


def _jsonable(value: Any) -> Any:
    return None if value is None else orjson.loads(orjson.dumps(value, default=json_default))
