"""The runs a caller may see, one page at a time: ``GET /v1/runs``.

    GET /v1/runs?status=&provider=&tenant=&q=&cursor=&limit=

Answered from the gateway's view of the ``runs`` topic (``run_views.RunStates``: the latest
RunState of every run the topic still holds), newest first (by start, then run id). Filters:
``status`` (repeat it, or comma-separate, for several; ``waiting`` stands for both waiting
states), ``provider``, ``tenant``, and ``q``, which finds a run by a part of its id or of one of
its provider object ids (``resp_…``, ``msg_…``). ``limit`` rows (1–200, default 50) and, when
more follow, ``next_cursor``: pass it back as ``cursor`` for the next page. A cursor is opaque
(base64 of the last row's sort key): runs that start meanwhile appear on the first page, never
twice across pages.

Tenants: with ``api_tokens`` configured the token decides the tenant and only its runs are
listed (``tenant=`` naming another is 403); a run whose id another tenant owns (``owners.py``)
is not listed, as ``GET /v1/runs/{id}`` would not show it. Without tokens every tenant's runs are
listed and ``tenant=`` filters.

Each row: ``run_id``, ``status``, ``provider``/``api``/``model``, ``tenant``, ``started_at``,
``updated_at``, ``finished_at`` (epoch ms), ``duration_ms`` (to the end, or to the latest update
of a live run), ``tokens`` (input/output/cache read/cache write/reasoning/total, summed over the
run's provider calls), ``needs_reconciliation`` with its notes, ``waiting`` (``approval``,
``tool_results``, ``continuation`` or null), ``reason``/``raw_reason``, ``pending_approvals``,
``open_tool_calls``, ``provider_object_ids``, ``event_count`` and ``last_seq``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson
from fastapi import APIRouter, HTTPException, Query, Request

from modelevents.schemas.run_state import RUN_STATES, RunState
from modelevents.services.gateway.auth import caller_tenant
from modelevents.services.gateway.state import Gateway, gateway_of

__all__ = ["router", "run_row", "select_runs"]

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
        raise HTTPException(400, detail="cursor is not one this gateway gave; pass the "
                                        "next_cursor of the previous page as it was") from None
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
                raise HTTPException(422, detail=f"status {status!r} is not a run status; one "
                                                f"of {', '.join(RUN_STATES)} or waiting")
    return wanted or None


def select_runs(gateway: Gateway, *, tenant: str | None, statuses: set[str] | None = None,
                provider: str | None = None, query: str | None = None,
                after: tuple[int, str] | None = None, limit: int = 50
                ) -> tuple[list[RunState], tuple[int, str] | None]:
    """The page of run states the filters select, newest first, and the sort key to go on
    after (None: this is the last page). ``tenant`` None: every tenant's."""
    needle = (query or "").strip()
    chosen: list[RunState] = []
    for state in gateway.run_states.states.values():
        if tenant is not None and state.tenant != tenant:
            continue
        owner = gateway.owners.owner(state.run_id)
        if owner is not None and owner != state.tenant:
            continue  # a state under an id another tenant owns is nobody's run to show
        if statuses is not None and state.status not in statuses:
            continue
        if provider and state.provider != provider:
            continue
        if needle and needle not in state.run_id and not any(
                needle in object_id for object_id in state.provider_object_ids):
            continue
        if after is not None and _sort_key(state) >= after:
            continue
        chosen.append(state)
    chosen.sort(key=_sort_key, reverse=True)
    page = chosen[:limit]
    more = len(chosen) > limit
    return page, (_sort_key(page[-1]) if more and page else None)


@router.get("/v1/runs", summary="The runs the caller may see, newest first, a page at a time",
            responses={400: {"description": "a cursor this gateway did not give"},
                       403: {"description": "`tenant` names another tenant than the token's"},
                       422: {"description": "an unknown status"},
                       503: {"description": "the gateway is still reading `runs`"}})
async def list_runs(request: Request,
                    status: list[str] = _STATUS_QUERY,
                    tenant: str | None = Query(None, description="only this tenant's runs"),
                    provider: str | None = Query(None, description="only this provider's runs"),
                    q: str | None = Query(None, max_length=200,
                                          description="part of a run id or provider object id"),
                    cursor: str | None = Query(None, description="next_cursor of the page before"),
                    limit: int = Query(50, ge=1, le=MAX_LIMIT)) -> dict[str, Any]:
    """``runs``: rows as the module docstring says; ``next_cursor``: null on the last page;
    ``complete``: false while the gateway has not yet read the ``runs`` topic to its end (just
    started: the list may still grow)."""
    gateway = gateway_of(request)
    config = gateway.config
    seen_tenant = caller_tenant(request, tenant) if config.api_tokens else tenant
    after = _decode_cursor(cursor) if cursor else None
    page, last = select_runs(gateway, tenant=seen_tenant, statuses=_statuses(status),
                             provider=provider, query=q, after=after, limit=limit)
    return {"runs": [run_row(state) for state in page],
            "next_cursor": _encode_cursor(last) if last is not None else None,
            "complete": gateway.run_states.caught_up.is_set()}
