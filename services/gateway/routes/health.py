"""``GET /healthz`` (liveness) and ``GET /readyz`` (readiness) of the gateway.

Liveness says the process answers HTTP: a supervisor restarts it when this fails. Readiness says
a webhook or a forwarded stream sent now would be acknowledged: Kafka is reachable and the
pipeline's topics exist as configured (``services/topics.verify_topics``), and the gateway's
views of whole topics (``run-owners``, ``runs``: started by the app's lifespan) have read what
the topics held when it started — until then an owner or a run not found may just not be read
yet. A load balancer stops sending traffic while it fails; providers would get 503 anyway and
retry. The Kafka check talks to the broker, so its result is reused for :data:`READY_CACHE_S`;
the views are waited for :data:`READY_VIEWS_WAIT_S` at most (a probe wants a prompt answer).
"""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from modelevents.schemas.errors import ModelEventsError
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.state import Gateway
from modelevents.services.kafka import topics

__all__ = ["router", "readiness"]

router = APIRouter(tags=["health"])

READY_CACHE_S = 1.0
READY_TIMEOUT_S = 5.0
READY_VIEWS_WAIT_S = 1.0


@router.get("/healthz", summary="Liveness")
async def healthz() -> dict[str, str]:
    """200 while the gateway process serves HTTP."""
    return {"status": "ok"}


# /readyz's 503 is the readiness report itself, read by probes and operators, not a problem:
# ``x-report`` keeps routes/openapi.py from describing it as one.
READINESS_REPORT = {"type": "object", "required": ["status", "reason"],
                    "properties": {"status": {"type": "string", "example": "not ready"},
                                   "reason": {"type": "string"}}}


@router.get("/readyz", summary="Readiness: Kafka reachable, the topics exist, the views read",
            responses={503: {"description": "Kafka unreachable, a topic missing/mismatched, or "
                                            "the run owners and states not read yet",
                             "content": {"application/json": {"schema": READINESS_REPORT}},
                             "x-report": True}})
async def readyz(gateway: RunningGateway) -> JSONResponse:
    """200 when Kafka answers, every pipeline topic exists with the configured partitions and the
    gateway has read the run owners and states; 503 with the reason (and what to do)
    otherwise."""
    status, body = await readiness(gateway)
    return JSONResponse(body, status_code=status)


async def readiness(gateway: Gateway, views_wait: float = READY_VIEWS_WAIT_S,
                    ) -> tuple[int, dict[str, str]]:
    """``(200 | 503, body)`` of the readiness check (``POST /v1/runs`` asks it too before a
    provider is called: output that Kafka cannot take would be lost): Kafka's part reused for
    READY_CACHE_S, then the views, waited for ``views_wait`` seconds at most."""
    status, body = await _kafka_ready(gateway)
    if status != 200:
        return status, body
    for view in gateway.views:
        if view.caught_up.is_set():
            continue  # for good: what the view reads after its start is followed live
        if not await view.wait_until(view.caught_up.is_set, views_wait):
            return 503, {"status": "not ready",
                         "reason": f"the gateway is still reading {view.topic} from its start "
                                   "(who owns each run id, the runs' states, their calls); "
                                   "retry shortly"}
    return status, body


async def _kafka_ready(gateway: Gateway) -> tuple[int, dict[str, str]]:
    cached = gateway.ready
    now = time.monotonic()
    if cached is None or now - cached[0] > READY_CACHE_S:
        settings = gateway.settings
        try:
            await asyncio.wait_for(topics.verify_topics(settings), READY_TIMEOUT_S)
            cached = (now, 200, {"status": "ready", "kafka": settings.bootstrap_servers,
                                 "topic_prefix": settings.topic_prefix})
        except TimeoutError:
            cached = (now, 503, {"status": "not ready",
                                 "reason": f"Kafka at {settings.bootstrap_servers} did not answer "
                                           f"within {READY_TIMEOUT_S:g} s"})
        except ModelEventsError as exc:
            cached = (now, 503, {"status": "not ready", "reason": str(exc)})
        gateway.ready = cached
    return cached[1], cached[2]
