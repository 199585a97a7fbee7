"""Deciding an approval from outside the executor: ``POST /v1/runs/{run_id}/approvals/{id}``.

    POST /v1/runs/{run_id}/approvals/{approval_id}   {"granted": true, "reason": "checked"}

The tool executor (``modelevents tools run``) asks with an ``approval.requested`` event and
waits for an ``approval.resolved`` of the same approval id on ``events``; this route writes that
event to ``ingest`` (``services/run_logic/executor_events.approval_resolution``, the builder the
executor's own ``resolve_approval`` uses), acknowledged (acks=all) before the 202. Its
``decision`` is ``granted`` or ``denied``; its ``decider`` is who decided: the tenant of the
bearer token (with ``api_tokens``), else the body's ``decided_by`` or the gateway's default
tenant, as ``tenant:<name>`` or ``<decided_by> (tenant:<name>)``. The UI's Grant and Deny
buttons call it.

Only the run's owner may decide (another tenant: 404, as for a run it cannot see), and only an
approval the run is waiting for (``pending_approvals`` of its state on ``runs``; 409 for one
decided already or never asked — the event id is the approval's, so even a decision racing
another is written once: the first stands).

The decision is bound to the arguments that were asked for: the route copies the hash the
approval id was made for (``arguments_sha256``, executor_events.new_approval_id) onto the
``approval.resolved``, and the executor runs the call only with arguments of that hash. A client
that shows the arguments may send the hash it showed (``arguments_sha256`` in the body): one that
is not the requested one is refused (409 ``arguments_changed``).
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from modelevents.schemas.ids import check_id
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.gateway.routes.runs import known_run
from modelevents.services.run_logic.executor_events import approval_resolution, hash_of_approval

__all__ = ["router", "Decision"]

router = APIRouter(tags=["runs"])

# How long a decision waits for the gateway's view of ``runs`` to show the approval pending (the
# page may have seen the approval.requested on ``events`` a moment before the state on ``runs``).
PENDING_WAIT_S = 5.0


class Decision(BaseModel):
    granted: bool = Field(description="true: run the call; false: refuse it")
    reason: str = Field("", max_length=2000, description="why, kept in the event's envelope")
    decided_by: str | None = Field(None, max_length=200, description=(
        "who decided, when the gateway has no api_tokens (with tokens the token's tenant is "
        "the decider and this is kept beside it)"))
    arguments_sha256: str | None = Field(None, max_length=64, description=(
        "the hash of the arguments the decider saw (approval.requested's envelope): refused "
        "when it is not the one the approval was asked for"))


@router.post("/v1/runs/{run_id}/approvals/{approval_id}", status_code=202,
             summary="Grant or deny an approval the run waits for (→ approval.resolved)",
             responses={202: {"description": "approval.resolved acknowledged on ingest"},
                        404: {"description": "no such run (or another tenant's)"},
                        409: {"description": "the run is not waiting for this approval"},
                        503: {"description": "Kafka did not acknowledge: nothing was kept"}})
async def decide(run_id: str, approval_id: str, decision: Decision,
                 request: Request, gateway: RunningGateway) -> JSONResponse:
    check_id(approval_id, "approval id")
    _state, owner = known_run(gateway, request, run_id)
    state = await gateway.run_states.wait_for(
        run_id, lambda s: approval_id in s.pending_approvals, PENDING_WAIT_S)
    if state is None or state.tenant != owner or approval_id not in state.pending_approvals:
        raise GatewayProblem(ProblemCode.not_pending, (
            f"run {run_id!r} is not waiting for approval {approval_id!r} (decided already, or "
            "never asked); its events say which"))
    requested = hash_of_approval(approval_id)
    if decision.arguments_sha256 is not None and decision.arguments_sha256 != requested:
        raise GatewayProblem(ProblemCode.arguments_changed, (
            f"approval {approval_id!r} was asked for arguments of hash {requested}, not "
            f"{decision.arguments_sha256}: show the approval.requested again and decide on it"))
    who = f"tenant:{owner}"
    if decision.decided_by:
        who = f"{decision.decided_by} ({who})"
    event = approval_resolution(run_id, owner, approval_id, decision.granted, who,
                                decision.reason, int(time.time() * 1000), requested)
    await gateway.publish_ingest(event)
    return JSONResponse({"run_id": run_id, "approval_id": approval_id,
                         "decision": event.payload.decision,  # type: ignore[union-attr]
                         "decider": who, "arguments_sha256": requested,
                         "event_id": event.event_id}, status_code=202)
