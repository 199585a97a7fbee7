"""Decision records, for the UI and any client: ``GET /v1/decisions`` and
``GET /v1/decisions/{decision_id}``.

    GET /v1/decisions                 every decision the caller may see, current ones first,
                                      then the newest: id, bundle, target, owner, status,
                                      revision, recorded and demoted times
    GET /v1/decisions/{decision_id}   the latest revision whole (its id or a unique prefix of
                                      it): the same JSON as ``modelevents decide show ID --json``

Answered from the gateway's view of the compacted ``decisions`` topic
(``events/decisions.py``), which ``modelevents decide`` and the decisions watcher write: a
demotion is served as soon as the gateway has read it. Tenants: without ``api_tokens`` every
decision is shown. With them, a decision is shown to a token's tenant when each eval result it
rests on is shown to that tenant (``routes/evals.py``: each of the result's runs is the
tenant's) — a decision is made on the tenant's evidence. A decision resting on a result the
gateway does not hold on ``eval-results`` (a result from a JSON file), or on another tenant's,
is shown to no token: ``modelevents decide show`` reads it from Kafka. A demotion names the live
run that fired its trigger, which may be any tenant's run on the decision's target: its run id
and event id are given only when that run is the caller's, and otherwise are null and listed in
the demotion's ``withheld`` (the trigger, reason, expected and observed values and the topic,
partition and offset stay).

More on this module: docs/gateway-api.md.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from modelevents.schemas.decision_record import Decision
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.events.decisions import decision_row
from modelevents.services.gateway.routes.topic_records import (
    by_id_or_prefix,
    caller_tenant_once_read,
    runs_of,
)
from modelevents.services.gateway.state import Gateway

__all__ = ["router"]

router = APIRouter(tags=["decisions"])

MAX_LIMIT = 500
WITHHELD = ("run_id", "event_id")
WHOSE = "a decision's eval results"  # hold the runs that say whose a decision is


def _visible(gateway: Gateway, tenant: str | None) -> list[Decision]:
    """The decisions ``tenant`` may see (module docstring)."""
    decisions = list(gateway.decisions.decisions.values())
    if tenant is None:
        return decisions
    results = gateway.eval_results.results

    def tenants(result_id: str) -> bool:
        result = results.get(result_id)
        return result is not None and runs_of(gateway, result.run_ids, tenant,
                                                named=result.tenant)

    return [d for d in decisions if d.eval_results and all(map(tenants, d.eval_results))]


def _order(decision: Decision) -> tuple[bool, int, str]:
    return (not decision.current, -decision.updated_at, decision.decision_id)


@router.get("/v1/decisions", summary="The decision records the caller may see",
            responses={200: {"description": "`decisions`: one row per decision, current ones "
                                            "first, then the most recently changed; "
                                            "`complete`: false while the gateway is still "
                                            "reading `decisions` or `eval-results`"},
                       503: {"description": "the gateway is still reading `run-owners`"}})
async def list_decisions(request: Request, gateway: RunningGateway,
                         limit: int = Query(100, ge=1, le=MAX_LIMIT,
                                            description="at most this many decisions"),
                         ) -> dict[str, Any]:
    """Each row: ``decision_id``, ``bundle_id``, ``bundle_name``, ``target`` (``provider``,
    ``api``, ``model``, ``snapshot``), ``owner``, ``status`` (current | historical),
    ``revision``, ``decided_at`` and ``updated_at`` (epoch ms), ``demoted_at`` and ``trigger``
    (null while current)."""
    tenant = caller_tenant_once_read(gateway, request, WHOSE)
    shown = sorted(_visible(gateway, tenant), key=_order)
    return {"decisions": [decision_row(d) for d in shown[:limit]],
            "more": len(shown) > limit,
            # Whose decision one is depends on the eval results read too.
            "complete": gateway.decisions.caught_up.is_set()
            and gateway.eval_results.caught_up.is_set()}


def _as_seen_by(gateway: Gateway, decision: Decision, tenant: str | None) -> dict[str, Any]:
    """The record as JSON, the demoting run's ids withheld from another tenant."""
    record = decision.as_dict()
    demotion = record["demotion"]
    if tenant is None or demotion is None or demotion["run_id"] is None:
        return record
    if gateway.owner_of(demotion["run_id"]) != tenant:
        record["demotion"] = {**demotion, **dict.fromkeys(WITHHELD), "withheld": list(WITHHELD)}
    return record


@router.get("/v1/decisions/{decision_id}", summary="One decision record, its latest revision",
            response_class=Response,
            responses={200: {"content": {"application/json": {}},
                             "description": "the latest revision of the record "
                                            "(docs/migration.md): bundle, target, required "
                                            "capabilities, availability, eval result ids, "
                                            "evidence URLs, exceptions, owner, retest "
                                            "triggers, status and, when historical, the "
                                            "demotion with its evidence"},
                       404: {"description": "no such decision, or not the caller's"},
                       422: {"description": "the prefix names several decisions"},
                       503: {"description": "the gateway is still reading `decisions` or "
                                            "`run-owners`"}})
async def get_decision(decision_id: str, request: Request, gateway: RunningGateway
                       ) -> Response:
    tenant = caller_tenant_once_read(gateway, request, WHOSE)
    visible = {d.decision_id: d for d in _visible(gateway, tenant)}
    found = by_id_or_prefix(visible, decision_id, gateway.decisions, "decision")
    return Response(orjson.dumps(_as_seen_by(gateway, found, tenant)),
                    media_type="application/json")
