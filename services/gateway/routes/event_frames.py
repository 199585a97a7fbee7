"""One event of a run with the provider frame it came from: ``GET /v1/runs/{run_id}/events/{seq}``.

The SSE stream of ``/events`` carries the ``normalize`` projection, without the verbatim frame
(it would double what every follower reads); this route gives one event's projection and its
envelope — the provider's frame as received (an SSE event, a webhook body, a polled object, an
executor's record) — so that the UI's "raw" button is one click away. ``body`` is the frame as
UTF-8 text when it is that (``encoding: "utf-8"``), else base64 (``encoding: "base64"``). An event
cut into pieces is joined first (its ``seq`` is that of its first piece). Only the run's owner
sees it (another tenant: 404).
"""

from __future__ import annotations

import base64
from contextlib import aclosing
from typing import Any

import orjson
from fastapi import APIRouter, Request

from modelevents.schemas.events import ModelEvent
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.events.followers import json_default
from modelevents.services.gateway.events.run_states import run_history
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.gateway.routes.runs import known_run

__all__ = ["router", "event_with_frame"]

router = APIRouter(tags=["runs"])


def event_with_frame(event: ModelEvent) -> dict[str, Any]:
    body = event.envelope.body
    try:
        text, encoding = body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(body).decode(), "base64"
    return {"event": orjson.loads(orjson.dumps(event.projection(), default=json_default)),
            "adapter": event.adapter, "received_at": event.received_at,
            "envelope": {"content_type": event.envelope.content_type, "encoding": encoding,
                         "size": len(body), "body": text}}


@router.get("/v1/runs/{run_id}/events/{seq}", summary="One event and its raw provider frame",
            responses={404: {"description": "no such run, or no event with this seq yet"}})
async def get_event(run_id: str, seq: int, request: Request,
                    gateway: RunningGateway) -> dict[str, Any]:
    _state, owner = known_run(gateway, request, run_id)
    if seq < 0:
        raise GatewayProblem(ProblemCode.invalid_input, "seq is a whole number from 0")
    async with aclosing(run_history(gateway.config.kafka, run_id, owner,
                                    after_seq=seq - 1)) as events:
        async for event in events:
            if event.seq == seq:
                return event_with_frame(event)
            break
    raise GatewayProblem(ProblemCode.not_found, f"run {run_id!r} has no event {seq} on "
                         f"{gateway.config.kafka.topic('events')} (yet)")
