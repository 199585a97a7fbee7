"""``POST /v1/runs/{run_id}/input``: the input packet of a run an application forwards.

An application that calls a provider itself and tees the stream to ``/v1/runs/{id}/frames``
(``forwarded_frames.py``) may also say what it asked: the neutral request it rendered the provider call
from, the target it called, and what it knows of the call. The gateway redacts it under its
policy and writes it to ``run-inputs`` as the gateway does for the runs it starts
(``inputs/packets.py``, origin ``forwarded``), so ``/messages`` and the audit archive have the
request's side of the run too. A forwarded run without one is no error: ``audit verify`` lists
it as a run without an input packet.

The run id is claimed for the caller's tenant as forwarded frames claim it (``events/owners.py``);
another tenant's id is 404 with nothing written. ``stream`` is the stream id the frames of this
call are (or will be) forwarded under (default ``s0``): ``/messages`` takes the model's side from
that stream's first event on. Kafka unavailable → 503: send the same body again (the packet is
written once more, the same request; compaction keeps the last).
"""

from __future__ import annotations

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from modelevents.adapters.registry import ADAPTERS, resolve_api
from modelevents.schemas.errors import InputError, InvalidId
from modelevents.schemas.ids import check_id, check_provider
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.gateway.auth import caller_tenant
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["router", "ForwardedInput"]

router = APIRouter(tags=["forwarded frames"])


class ForwardedInput(BaseModel):
    """What the application asked, and of whom."""

    model_config = ConfigDict(extra="forbid")

    request: NeutralRequest
    api: str = Field(min_length=1, description="the provider API called, e.g. openai-responses "
                                               "(or an alias: responses, chat, claude …)")
    model: str = Field(min_length=1)
    provider: str | None = Field(None, description="default: the API's")
    stream: str = Field("s0", description="the stream id the call's frames are forwarded under")
    provider_object_id: str | None = None
    last_cursor: str | None = None


@router.post("/v1/runs/{run_id}/input", status_code=201,
             summary="Record the input packet of a forwarded run",
             responses={201: {"description": "the packet is written and acknowledged"},
                        404: {"description": "the run id is another tenant's: nothing written"},
                        422: {"description": "an invalid run, stream id or provider name, or an "
                                              "unknown api"},
                        503: {"description": "Kafka unavailable: send the same body again"}})
async def record_input(run_id: str, body: ForwardedInput, request: Request,
                       gateway: RunningGateway,
                       x_correlation_id: str | None = Header(None, max_length=255)) -> Response:
    try:
        check_id(run_id)
        check_id(body.stream, "stream id")
        for provider in (body.provider, body.request.target and body.request.target.provider):
            if provider:
                check_provider(provider)
    except InvalidId as exc:
        raise GatewayProblem(ProblemCode.invalid_id, str(exc)) from None
    try:
        candidates = resolve_api(body.api)
    except InputError as exc:
        raise GatewayProblem(ProblemCode.invalid_input,
                             str(exc).replace("--provider ", "api=")) from None
    if len(candidates) != 1:
        raise GatewayProblem(ProblemCode.invalid_input, (
            f"api={body.api!r} names a family ({', '.join(candidates)}); name the one API "
            "called"))
    api = candidates[0]
    tenant = caller_tenant(request, body.request.tenant)
    if gateway.owner_of(run_id) not in (None, tenant):
        raise _taken(run_id)
    if not await gateway.claim_run(run_id, tenant):  # KafkaUnavailable → 503 (app.py)
        raise _taken(run_id)
    packet = gateway.packets.packet(
        body.request, run_id=run_id, tenant=tenant, call=body.stream,
        provider=body.provider or ADAPTERS[api].default_provider, api=api, model=body.model,
        origin="forwarded", correlation_id=x_correlation_id,
        provider_object_id=body.provider_object_id, last_cursor=body.last_cursor)
    await gateway.publish_input(packet)  # KafkaUnavailable → 503 (app.py)
    return JSONResponse({"run_id": run_id, "input_fingerprint": packet.fingerprint,
                         "api": api, "provider": packet.provider, "stream": body.stream,
                         "redactions": packet.redaction.redactions,
                         "links": {"messages": f"/v1/runs/{run_id}/messages"}},
                        status_code=201)


def _taken(run_id: str) -> GatewayProblem:
    return GatewayProblem(ProblemCode.run_not_found, (
        f"no run {run_id!r} of this tenant: the run id is taken; forward under a run id of your "
        "own"))
