"""Eval results, for the UI and any client: ``GET /v1/evals`` and ``GET /v1/evals/{result_id}``.

    GET /v1/evals                 every result the caller may see, newest first: id, corpus and
                                  version, mode, date, and each bundle's runs, accepted, rejected
    GET /v1/evals/{result_id}     one result whole (its id or a unique prefix of it): the same
                                  JSON as ``modelevents eval show ID --json``

Answered from the gateway's view of the compacted ``eval-results`` topic
(``events/eval_results.py``), which ``modelevents eval run`` writes. Tenants: without
``api_tokens`` every result is shown. With them, a result that names the tenant ``eval run``
ran as (``tenant``) is shown to that tenant's tokens, unless one of its runs is known to be
another tenant's. A result that names none is shown to a token's tenant when each of its runs
is that tenant's (the run's owner on ``run-owners``, else its state's tenant on ``runs``) — the
result names the runs, their verdicts and the evidence of their gates, so it is the tenant's
data as its runs are. A result with another tenant's run, one without a tenant holding a run
whose owner the gateway does not know (an archive of another cluster re-scored), or one with no
run at all, is shown to no token: ``modelevents eval show`` reads it from Kafka.

More on this module: docs/gateway-api.md.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from modelevents.schemas.eval_results import decode
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.events.eval_results import StoredResult
from modelevents.services.gateway.routes.topic_records import (
    by_id_or_prefix,
    caller_tenant_once_read,
    runs_of,
)
from modelevents.services.gateway.state import Gateway

__all__ = ["router"]

router = APIRouter(tags=["evals"])

MAX_LIMIT = 500


def _visible(gateway: Gateway, request: Request) -> list[StoredResult]:
    """The results the caller may see (module docstring)."""
    stored = list(gateway.eval_results.results.values())
    tenant = caller_tenant_once_read(gateway, request, "a result's runs")
    if tenant is None:
        return stored
    return [result for result in stored
            if runs_of(gateway, result.run_ids, tenant, named=result.tenant)]


def _newest_first(result: StoredResult) -> tuple[int, str]:
    return (-result.row["created_at"], result.row["result_id"])


@router.get("/v1/evals", summary="The eval results the caller may see, newest first",
            responses={200: {"description": "`results`: one row per result; `complete`: "
                                            "false while the gateway is still reading "
                                            "`eval-results`"},
                       503: {"description": "the gateway is still reading `run-owners`"}})
async def list_evals(request: Request, gateway: RunningGateway,
                     limit: int = Query(100, ge=1, le=MAX_LIMIT,
                                        description="at most this many results (the newest)"),
                     ) -> dict[str, Any]:
    """Each row: ``result_id``, ``corpus``, ``corpus_version``, ``mode`` (live | frozen),
    ``created_at`` (epoch ms), ``bundles`` (each: ``bundle``, ``name``, ``runs``,
    ``accepted``, ``rejected``, ``not_started``) and the totals ``runs``, ``accepted``,
    ``rejected``."""
    shown = sorted(_visible(gateway, request), key=_newest_first)
    return {"results": [result.row for result in shown[:limit]],
            "more": len(shown) > limit,
            "complete": gateway.eval_results.caught_up.is_set()}


@router.get("/v1/evals/{result_id}", summary="One eval result, whole",
            response_class=Response,
            responses={200: {"content": {"application/json": {}},
                             "description": "the result record (docs/migration.md): corpus, "
                                            "date, each bundle's gates, observed model "
                                            "snapshots and API revisions and figures of "
                                            "accepted runs, the paired comparisons, every "
                                            "run's verdict with the evidence of its gates"},
                       404: {"description": "no such result, or not the caller's"},
                       422: {"description": "the prefix names several results"},
                       503: {"description": "the gateway is still reading `eval-results` or "
                                            "`run-owners`"}})
async def get_eval(result_id: str, request: Request, gateway: RunningGateway) -> Response:
    visible = {result.row["result_id"]: result for result in _visible(gateway, request)}
    found = by_id_or_prefix(visible, result_id, gateway.eval_results, "eval result")
    return Response(orjson.dumps(decode(found.value)), media_type="application/json")
