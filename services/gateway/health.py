"""``GET /healthz`` (liveness) and ``GET /readyz`` (readiness) of the gateway.

Liveness says the process answers HTTP: a supervisor restarts it when this fails. Readiness says
a webhook or a forwarded stream sent now would be acknowledged: Kafka is reachable and the
pipeline's topics exist as configured (``services/topics.verify_topics``). A load balancer stops
sending traffic while it fails; providers would get 503 anyway and retry. The check talks to the
broker, so its result is reused for :data:`READY_CACHE_S`.
"""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from modelevents.schemas.errors import ModelEventsError
from modelevents.services import topics
from modelevents.services.gateway.state import Gateway, gateway_of

__all__ = ["router", "readiness"]

router = APIRouter(tags=["health"])

READY_CACHE_S = 1.0
READY_TIMEOUT_S = 5.0


@router.get("/healthz", summary="Liveness")
async def healthz() -> dict[str, str]:
    """200 while the gateway process serves HTTP."""
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: Kafka reachable and the topics exist",
            responses={503: {"description": "Kafka unreachable or a topic missing/mismatched"}})
async def readyz(request: Request) -> JSONResponse:
    """200 when Kafka answers and every pipeline topic exists with the configured partitions;
    503 with the reason (and what to do) otherwise."""
    status, body = await readiness(gateway_of(request))
    return JSONResponse(body, status_code=status)


async def readiness(gateway: Gateway) -> tuple[int, dict[str, str]]:
    """``(200 | 503, body)`` of the readiness check, reused for READY_CACHE_S (``POST /v1/runs``
    asks it too before a provider is called: output that Kafka cannot take would be lost)."""
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
