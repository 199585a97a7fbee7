"""The runs a caller may see, one page at a time: ``GET /v1/runs``.

    GET /v1/runs?status=&provider=&tenant=&q=&cursor=&limit=[&watch=true]

Answered from the gateway's view of the ``runs`` topic (``events/run_states.RunStates``: the latest
RunState of every run the topic still holds), newest first (by start, then run id). Filters:
``status`` (repeat it, or comma-separate, for several; ``waiting`` stands for both waiting
states), ``provider``, ``tenant``, and ``q``, which finds a run by a part of its id or of one of
its provider object ids (``resp_…``, ``msg_…``). ``limit`` rows (1–200, default 50) and, when
more follow, ``next_cursor``: pass it back as ``cursor`` for the next page. A cursor is opaque
(base64 of the last row's sort key): runs that start meanwhile appear on the first page, never
twice across pages.

``watch=true`` answers Server-Sent Events: the first page, then every change of the list.

More on this module: docs/gateway-api.md, ``services/gateway/routes/run_list.py``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from modelevents.schemas.run_state import RUN_STATES, RunState
from modelevents.services.gateway.auth import caller_tenant
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.gateway.state import Gateway

__all__ = ["router", "run_row", "select_runs", "RunFilter", "first_page"]

router = APIRouter(tags=["runs"])

WAITING = ("waiting_for_tool", "waiting_for_approval")
MAX_LIMIT = 200
_STATUS_QUERY = Query([], description="run statuses (repeat or comma-separate; `waiting`: both "
                                      "waiting states)")


def run_row(state: RunState) -> dict[str, Any]:
    """One run as the listing shows it (module docstring)."""
    usage = state.usage
    end = state.finished_at or state.updated_at
    if state.pending_approvals or state.status == "waiting_for_approval":
        waiting = "approval"
    elif state.status == "waiting_for_tool":
        waiting = state.reason or "tool_results"
    else:
        waiting = None
    return {
        "run_id": state.run_id, "status": state.status, "tenant": state.tenant,
        "provider": state.provider, "api": state.api, "model": state.model,
        "started_at": state.started_at, "updated_at": state.updated_at,
        "finished_at": state.finished_at,
        "duration_ms": (end - state.started_at
                        if end is not None and state.started_at is not None else None),
        "tokens": {"input": usage.input_tokens, "output": usage.output_tokens,
                   "cache_read": usage.cache_read_tokens, "cache_write": usage.cache_write_tokens,
                   "reasoning": usage.reasoning_tokens, "total": usage.total_tokens}
        if usage is not None else None,
        "needs_reconciliation": state.needs_reconciliation,
        "reconciliation_notes": list(state.reconciliation_notes),
        "waiting": waiting, "reason": state.reason, "raw_reason": state.raw_reason,
        "pending_approvals": list(state.pending_approvals),
        "open_tool_calls": list(state.open_tool_calls),
        "provider_object_ids": list(state.provider_object_ids),
        "event_count": state.event_count, "last_seq": state.last_seq,
        "last_error": state.last_error,
        "sources": {"untrusted": state.untrusted_sources, "blocked": state.blocked_sources},
        "policy_violations": state.policy_violations,
    }


def _sort_key(state: RunState) -> tuple[int, str]:
    return (state.started_at or state.updated_at or 0, state.run_id)


def _encode_cursor(key: tuple[int, str]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(key))).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        at, run_id = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(at, int) or not isinstance(run_id, str):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):
        raise GatewayProblem(ProblemCode.malformed_request, "cursor is not one this gateway "
                             "gave; pass the next_cursor of the previous page as it was") from None
    return at, run_id


def _statuses(asked: list[str]) -> set[str] | None:
    wanted: set[str] = set()
    for value in asked:
        for status in filter(None, (part.strip() for part in value.split(","))):
            if status == "waiting":
                wanted.update(WAITING)
            elif status in RUN_STATES:
                wanted.add(status)
            else:
                raise GatewayProblem(ProblemCode.invalid_input, f"status {status!r} is not a run "
                                     f"status; one of {', '.join(RUN_STATES)} or waiting")
    return wanted or None


@dataclass(frozen=True)
class RunFilter:
    """What a list shows: ``tenant`` None is every tenant's (module docstring)."""

    tenant: str | None
    statuses: set[str] | None = None
    provider: str | None = None
    query: str | None = None

    def shows(self, gateway: Gateway, state: RunState) -> bool:
        if self.tenant is not None and state.tenant != self.tenant:
            return False
        owner = gateway.owners.owner(state.run_id)
        if owner is not None and owner != state.tenant:
            return False  # a state under an id another tenant owns is nobody's run to show
        if self.statuses is not None and state.status not in self.statuses:
            return False
        if self.provider and state.provider != self.provider:
            return False
        needle = (self.query or "").strip()
        return not needle or needle in state.run_id or any(
            needle in object_id for object_id in state.provider_object_ids)


def select_runs(gateway: Gateway, shown: RunFilter, *, after: tuple[int, str] | None = None,
                limit: int = 50) -> tuple[list[RunState], tuple[int, str] | None]:
    """The page of run states the filter selects, newest first, and the sort key to go on
    after (None: this is the last page)."""
    chosen = [state for state in gateway.run_states.states.values()
              if shown.shows(gateway, state) and (after is None or _sort_key(state) < after)]
    chosen.sort(key=_sort_key, reverse=True)
    page = chosen[:limit]
    more = len(chosen) > limit
    return page, (_sort_key(page[-1]) if more and page else None)


@router.get("/v1/runs", summary="The runs the caller may see, newest first, a page at a time",
            response_model=None,
            responses={200: {"content": {"application/json": {}, "text/event-stream": {}},
                             "description": "the page; with watch=true, SSE: `page`, then `run`"
                                            " / `gone` as runs change"},
                       400: {"description": "a cursor this gateway did not give"},
                       403: {"description": "`tenant` names another tenant than the token's"},
                       422: {"description": "an unknown status"},
                       503: {"description": "the gateway is still reading `runs`"}})
async def list_runs(request: Request, gateway: RunningGateway,
                    status: list[str] = _STATUS_QUERY,
                    tenant: str | None = Query(None, description="only this tenant's runs"),
                    provider: str | None = Query(None, description="only this provider's runs"),
                    q: str | None = Query(None, max_length=200,
                                          description="part of a run id or provider object id"),
                    cursor: str | None = Query(None, description="next_cursor of the page before"),
                    limit: int = Query(50, ge=1, le=MAX_LIMIT),
                    watch: bool = Query(False, description="answer Server-Sent Events: the "
                                        "first page, then every change of a run the filters "
                                        "show")) -> dict[str, Any] | StreamingResponse:
    """``runs``: rows as the module docstring says; ``next_cursor``: null on the last page;
    ``complete``: false while the gateway has not yet read the ``runs`` topic to its end (just
    started: the list may still grow)."""
    config = gateway.config
    seen_tenant = caller_tenant(request, tenant) if config.api_tokens else tenant
    after = _decode_cursor(cursor) if cursor else None
    shown = RunFilter(seen_tenant, _statuses(status), provider, q)
    if watch:
        return StreamingResponse(run_list_changes(gateway, shown, limit),
                                 media_type="text/event-stream",
                                 headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
    return first_page(gateway, shown, after, limit)


def first_page(gateway: Gateway, shown: RunFilter, after: tuple[int, str] | None,
               limit: int) -> dict[str, Any]:
    page, last = select_runs(gateway, shown, after=after, limit=limit)
    return {"runs": [run_row(state) for state in page],
            "next_cursor": _encode_cursor(last) if last is not None else None,
            "complete": gateway.run_states.caught_up.is_set()}


# A watcher's changes not sent yet; beyond, its client is too far behind: the stream ends (the
# client asks again and gets a fresh first page).
WATCH_PENDING = 1000
WATCH_KEEP_ALIVE_S = 15.0


async def run_list_changes(gateway: Gateway, shown: RunFilter, limit: int
                           ) -> AsyncIterator[bytes]:
    """``GET /v1/runs?watch=true``: the first page (``event: page``, the JSON of the list), then
    for every state read of a run the filter shows ``event: run`` (its row), and ``event: gone``
    (``{"run_id"}``) for a run it showed and no longer does (its status left the filter)."""
    pending: asyncio.Queue[bytes] = asyncio.Queue(WATCH_PENDING)
    behind = asyncio.Event()

    def watch(before: RunState | None, state: RunState) -> None:
        if shown.shows(gateway, state):
            change = b"event: run\ndata: %s\n\n" % orjson.dumps(run_row(state))
        elif before is not None and shown.shows(gateway, before):
            change = b"event: gone\ndata: %s\n\n" % orjson.dumps({"run_id": state.run_id})
        else:
            return
        try:
            pending.put_nowait(change)
        except asyncio.QueueFull:
            behind.set()

    gateway.run_states.watchers.add(watch)
    try:
        page = first_page(gateway, shown, None, limit)
        yield b"event: page\ndata: %s\n\n" % orjson.dumps(page)
        while not behind.is_set():
            try:
                async with asyncio.timeout(WATCH_KEEP_ALIVE_S):
                    change = await pending.get()
            except TimeoutError:
                change = b": waiting\n\n"  # a keep-alive
            yield change
        yield b": this list fell too far behind the runs; ask again\n\n"
    finally:
        gateway.run_states.watchers.discard(watch)
