"""Several runs' events on one SSE connection: ``GET /v1/events?run=<id>[@<seq>]&run=…``.

A browser keeps at most 6 HTTP/1.1 connections to one host, and ``GET /v1/runs/{id}/events``
holds one per open run: a seventh run view would wait for one of the others to end. This route
carries up to :data:`MAX_RUNS` runs on one connection (the UI's tabs share one through a
SharedWorker: static/stream-worker.js). Each run is named by ``run=<id>``, or
``run=<id>@<seq>`` to go on after ``seq`` (what ``Last-Event-ID`` is for one run; ``@`` is not
a character of run ids). Each run is followed as ``/v1/runs/{id}/events`` follows it (the same
shared reader of the run, followers.py, so each event once, in seq order per run); the runs'
events interleave as they come.

Every event: ``id: <run id>@<seq>``, ``event: <kind>``, ``data: <the projection>``, as the
one-run stream's but for its ``id``. And one ``event: stream.end`` per run, ``data`` ``{"run_id",
"reason"}``: ``finished`` (after its ``run.finished``, or it had ended and every event was sent
already) or a refusal of that run alone — ``not_found`` (no such run, or another tenant's: the
same answer, as everywhere), ``not_ready`` (the gateway is still reading ``runs``; ask again in
a moment); with ``status`` and ``error`` saying it. The stream ends when every run's has, or as
a whole when one run's follower fell too far behind (a comment says so): the client asks again
with each run's last seq. Refused as a whole: no ``run`` or more than :data:`MAX_RUNS` (422), a
run named twice or a malformed ``run`` (422), a token that is no tenant's (401).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from modelevents.schemas.run_state import TERMINAL_RUN_STATES
from modelevents.services.gateway.auth import caller_tenant
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.events.followers import LAGGED
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.gateway.routes.runs import known_run
from modelevents.services.gateway.state import Gateway

__all__ = ["router", "MAX_RUNS", "parse_runs"]

router = APIRouter(tags=["runs"])
log = logging.getLogger("modelevents.gateway.event_streams")

MAX_RUNS = 50
# What one run's part waits for room in the merged stream (events of all runs, not sent yet).
_MERGED_ITEMS = 256
_RUN_QUERY = Query([], description="run id, or <run id>@<seq> to go on after seq (repeat)")
_CUT = b": a run's reader stopped; ask again, each run after its last seq\n\n"


def parse_runs(values: list[str]) -> list[tuple[str, int]]:
    """``run`` values as (run id, after seq); a 422 problem for what is not one."""
    if not values:
        raise _invalid("name the runs to follow: run=<run id> (repeat it), run=<run id>@<seq> "
                       "to go on after that seq")
    if len(values) > MAX_RUNS:
        raise _invalid(f"{len(values)} runs asked for; one stream carries at most {MAX_RUNS}: "
                       "open another for the rest")
    runs: list[tuple[str, int]] = []
    for value in values:
        run_id, at, seq = value.partition("@")
        if at and not (seq.isdigit() or seq == "-1"):
            raise _invalid(f"run={value!r}: after '@' comes the seq of the last event received "
                           "(a whole number, or -1)")
        runs.append((run_id, int(seq) if at else -1))
    named = [run_id for run_id, _ in runs]
    if len(set(named)) != len(named):
        twice = sorted({r for r in named if named.count(r) > 1})
        raise _invalid(f"run {twice[0]!r} is named twice; name each run once")
    return runs


def _invalid(detail: str) -> GatewayProblem:
    return GatewayProblem(ProblemCode.invalid_input, detail)


@router.get(
    "/v1/events", summary="Several runs' ModelEvents on one Server-Sent Events stream",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": (
        "per event `id` = `<run id>@<seq>`, `event` = kind, `data` = the JSON projection; one "
        "`stream.end` event per run (`data`: run_id, reason, status, error)")},
        401: {"description": "a token that is no tenant's"},
        422: {"description": "no run, too many, one named twice, or a malformed `run`"}})
async def stream_runs(request: Request, gateway: RunningGateway,
                      run: list[str] = _RUN_QUERY) -> StreamingResponse:
    """The named runs' events, each once and in seq order per run (module docstring)."""
    if gateway.config.api_tokens:
        caller_tenant(request)  # a bad token refuses the whole stream
    parts: list[tuple[str, str, int]] = []  # run id, owner, after
    ends: list[bytes] = []
    for run_id, after in parse_runs(run):
        try:
            state, owner = known_run(gateway, request, run_id)
        except GatewayProblem as exc:
            # The run alone is refused: not_ready while the gateway reads its topics, else
            # not_found (an invalid id, nobody's run, another tenant's: the same answer).
            reason = "not_ready" if exc.code is ProblemCode.unavailable else "not_found"
            ends.append(_end(run_id, reason, exc.status, exc.detail))
            continue
        if state is not None and state.status in TERMINAL_RUN_STATES and after >= state.last_seq:
            ends.append(_end(run_id, "finished"))
            continue
        parts.append((run_id, owner, after))
    return StreamingResponse(_merged(gateway, parts, ends), media_type="text/event-stream",
                             headers={"cache-control": "no-cache", "x-accel-buffering": "no"})


def _end(run_id: str, reason: str, status: int | None = None, error: str | None = None) -> bytes:
    body: dict[str, object] = {"run_id": run_id, "reason": reason}
    if status is not None:
        body.update(status=status, error=error)
    return b"event: stream.end\ndata: %s\n\n" % orjson.dumps(body)


async def _merged(gateway: Gateway, parts: list[tuple[str, str, int]],
                  ends: list[bytes]) -> AsyncIterator[bytes]:
    for end in ends:
        yield end
    if not parts:
        return
    merged: asyncio.Queue[bytes | None] = asyncio.Queue(_MERGED_ITEMS)
    tasks = [asyncio.create_task(_follow(gateway, run_id, owner, after, merged))
             for run_id, owner, after in parts]
    try:
        remaining = len(tasks)
        while remaining:
            chunk = await merged.get()
            if chunk is None:
                remaining -= 1
            elif chunk in (LAGGED, _CUT):
                yield chunk
                return  # one run is cut: the client asks again for every run, after its last
            else:
                yield chunk
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _follow(gateway: Gateway, run_id: str, owner: str, after: int,
                  merged: asyncio.Queue[bytes | None]) -> None:
    """One run's part: its follower's SSE with the run in each ``id``, then its end, then
    None (done)."""
    prefix = b"id: " + run_id.encode() + b"@"
    last = b""
    try:
        async with aclosing(gateway.followers.follow(run_id, owner, after)) as chunks:
            async for chunk in chunks:
                if chunk.startswith(b"id: "):
                    last = chunk
                    chunk = prefix + chunk[4:]
                elif chunk == LAGGED:
                    last = chunk
                await merged.put(chunk)
        if b"\nevent: run.finished\n" in last:
            await merged.put(_end(run_id, "finished"))
        elif last != LAGGED:
            await merged.put(_CUT)  # its reader stopped (a broker gone)
    except Exception:
        log.exception("following run %s in a stream of several failed", run_id)
        await merged.put(_CUT)
    await merged.put(None)  # not when cancelled: the stream is closing then
