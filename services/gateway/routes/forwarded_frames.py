"""``POST /v1/runs/{run_id}/frames``: frames that an application forwards
(docs/gateway-api.md).

An application that calls a provider itself tees the provider's stream here: the body is the
provider's SSE stream (``Content-Type: text/event-stream``, decoded with the project's SSE
decoder, ``adapters/sse.py``, through ``adapters/framing.frames_from_bytes``) or one provider
payload per line (``application/x-ndjson``; also ``application/jsonl``,
``application/json-lines``). Any other content type is 415.

Each event or line becomes one ProviderFrame of the run with a deterministic frame id, so a
body sent again writes the same frames; every frame is acknowledged by Kafka before the 2xx.

More on this module: docs/gateway-api.md, ``services/gateway/routes/forwarded_frames.py``.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.registry import (
    ADAPTERS,
    CLI_CHOICES,
    decoded_docs,
    detect_api,
    resolve_api,
)
from modelevents.schemas.end_of_input import end_of_input
from modelevents.schemas.errors import InputError, InvalidId
from modelevents.schemas.ids import check_id, check_provider
from modelevents.services.gateway.auth import caller_tenant
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.inputs.forwarded import publish_body
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["router", "FRAMINGS_BY_CONTENT_TYPE"]

router = APIRouter(tags=["forwarded frames"])

FRAMINGS_BY_CONTENT_TYPE: dict[str, str] = {
    "text/event-stream": "sse",
    "application/x-ndjson": "jsonl",
    "application/ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/json-lines": "jsonl",
    "application/x-jsonlines": "jsonl",
}
ENDS = ("stream", "run", "none")
# A frame's index is an Avro long: the body's last frame (and the end marker after it) must fit.
MAX_INDEX = 2**63 - 1


def _invalid(detail: str) -> GatewayProblem:
    return GatewayProblem(ProblemCode.invalid_input, detail)


def _not_yours(run_id: str) -> GatewayProblem:
    # The same answer as for a run that does not exist: an id of another tenant says nothing.
    return GatewayProblem(ProblemCode.run_not_found, (
        f"no run {run_id!r} of this tenant: the run id is taken; forward under a run id of your "
        "own"))


def _param(request: Request, name: str) -> str | None:
    value = request.query_params.get(name)
    if value is None:
        value = request.headers.get(f"x-modelevents-{name}")
    return value.strip() if value is not None else None


def _int_param(request: Request, name: str, default: int) -> int:
    raw = _param(request, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise _invalid(f"{name}={raw!r} is not a whole number") from None
    if value < 0:
        raise _invalid(f"{name}={raw!r} must be 0 or more")
    if value > MAX_INDEX:
        raise _invalid(f"{name}={raw[:40]!r} is beyond the largest frame index ({MAX_INDEX}); "
                       "count the stream's frames from 0")
    return value


def _framing(request: Request) -> str:
    content_type = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    framing = FRAMINGS_BY_CONTENT_TYPE.get(content_type)
    if framing is None:
        raise GatewayProblem(ProblemCode.unsupported_media_type, (
            f"Content-Type {content_type or '(none)'!r} is not a stream this endpoint reads; "
            "send the provider's SSE body as text/event-stream or one JSON payload per line as "
            "application/x-ndjson"))
    return framing


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise GatewayProblem(ProblemCode.body_too_large, (
            f"body of {declared} bytes exceeds the limit of {limit} bytes (max_forward_bytes); "
            "forward the stream in several bodies (index=…, end=none)"))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise GatewayProblem(ProblemCode.body_too_large, f"body exceeds the limit of {limit} "
                                 "bytes (max_forward_bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


_OPENAPI: dict[str, Any] = {
    "parameters": [
        {"name": "api", "in": "query", "required": True, "schema": {"type": "string"},
         "description": "provider API of the stream (or header X-Modelevents-Api): "
                        + ", ".join(c for c in CLI_CHOICES)},
        {"name": "provider", "in": "query", "schema": {"type": "string"},
         "description": "provider named on events (default: the API's)"},
        {"name": "tenant", "in": "query", "schema": {"type": "string"}},
        {"name": "stream", "in": "query", "schema": {"type": "string", "default": "s0"},
         "description": "stream id within the run; frame ids are {stream}:{index}"},
        {"name": "index", "in": "query", "schema": {"type": "integer", "default": 0},
         "description": "index of the body's first frame within the stream"},
        {"name": "end", "in": "query", "schema": {"type": "string", "enum": list(ENDS),
                                                   "default": "stream"},
         "description": "what follows the body: end of stream, end of run, or more frames"},
    ],
    "requestBody": {"required": True, "content": {
        "text/event-stream": {"schema": {"type": "string"}},
        "application/x-ndjson": {"schema": {"type": "string"}}}},
    "responses": {
        "200": {"description": "every frame written and acknowledged by Kafka"},
        "400": {"description": "the body holds no frames"},
        "404": {"description": "the run id is another tenant's: nothing was written"},
        "415": {"description": "not text/event-stream or application/x-ndjson"},
        "422": {"description": "unknown api, bad parameter, or an invalid run or stream id"},
        "413": {"description": "body larger than max_forward_bytes, or a frame larger than the "
                               "frames topic takes (kept: the frames written before it)"},
        "503": {"description": "Kafka did not acknowledge every frame: kept says how many it "
                               "did; send the same body again (copies are dropped)"},
    },
}


@router.post("/v1/runs/{run_id}/frames", summary="Forward a provider stream for a run",
             openapi_extra=_OPENAPI, response_class=JSONResponse)
async def forward_frames(request: Request, run_id: str,
                         gateway: RunningGateway) -> Response:
    """Publish the frames of a provider stream the application received itself (see the
    parameters); 200 with the number of frames once Kafka acknowledged all of them."""
    config = gateway.config
    framing = _framing(request)
    api_choice = _param(request, "api")
    if not api_choice:
        raise _invalid("name the provider API of the stream: ?api=openai-responses (or the "
                       "X-Modelevents-Api header); one of " + ", ".join(CLI_CHOICES))
    try:
        candidates = resolve_api(api_choice)
    except InputError as exc:
        raise _invalid(str(exc).replace("--provider ", "api=")) from None
    stream_id = _param(request, "stream") or "s0"
    end = _param(request, "end") or "stream"
    if end not in ENDS:
        raise _invalid(f"end={end!r}: choose one of {', '.join(ENDS)}")
    provider = _param(request, "provider") or None
    try:
        check_id(run_id)
        check_id(stream_id, "stream id")
        if provider is not None:
            check_provider(provider)
    except InvalidId as exc:
        raise GatewayProblem(ProblemCode.invalid_id, str(exc)) from None
    first_index = _int_param(request, "index", 0)
    tenant = caller_tenant(request, _param(request, "tenant"))
    if gateway.owner_of(run_id) not in (None, tenant):
        raise _not_yours(run_id)  # before the body is even read
    body = await _read_body(request, config.max_forward_bytes)
    frames = frames_from_bytes(body, run_key=run_id, provider="", api="", framing=framing,
                               stream_id=stream_id, received_at=int(time.time() * 1000),
                               tenant=tenant)
    if not frames:
        raise GatewayProblem(ProblemCode.malformed_request, (
            "the body holds no frames (an SSE event needs a data: line; NDJSON one JSON payload "
            "per line)"))
    if first_index > MAX_INDEX - len(frames):
        raise _invalid(f"index={first_index}: the body's {len(frames)} frames (and the end "
                       f"marker) would go past the largest frame index ({MAX_INDEX}); count the "
                       "stream's frames from 0")
    if len(candidates) == 1:
        api = candidates[0]
    else:
        try:
            api = detect_api(decoded_docs(frames), candidates=candidates)
        except InputError as exc:
            raise _invalid(str(exc).replace("--provider ", "api=")) from None
    if not await gateway.claim_run(run_id, tenant):  # KafkaUnavailable → 503 (app.py)
        raise _not_yours(run_id)

    provider = provider or ADAPTERS[api].default_provider
    for frame in frames:
        frame.api = api
        frame.provider = provider
        if first_index:
            frame.index += first_index
            frame.frame_id = f"{stream_id}:{frame.index}"
    if end != "none":
        frames.append(end_of_input(frames[-1], end))
    accepted = len(frames) - (end != "none")
    unkept = await publish_body(gateway, frames)
    if unkept is not None:  # some frames may be written: the answer counts them
        raise unkept.problem(gateway, accepted)
    return JSONResponse({"run_id": run_id, "api": api, "provider": provider, "stream": stream_id,
                         "accepted": accepted, "first_index": first_index,
                         "next_index": first_index + accepted, "end": end})
