"""What the routes serving records of a compacted topic's view share (``evals.py``,
``decisions.py``): whose records the caller may see, and one record found by its id or a
unique prefix of it, with the problems a client gets when there is none or several.
"""

from __future__ import annotations

from typing import TypeVar

from fastapi import Request

from modelevents.services.gateway.auth import caller_tenant
from modelevents.services.gateway.events.topic_view import TopicView
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.gateway.state import Gateway

__all__ = ["caller_tenant_once_read", "runs_of", "by_id_or_prefix"]

Record = TypeVar("Record")


def caller_tenant_once_read(gateway: Gateway, request: Request, what: str) -> str | None:
    """The caller's tenant; None on a gateway without ``api_tokens`` (every record shown).
    503 while the views of ``run-owners`` and ``runs``, which say whose runs ``what`` hold,
    are still being read."""
    if not gateway.config.api_tokens:
        return None
    tenant = caller_tenant(request)
    if not gateway.views_caught_up():
        raise GatewayProblem(ProblemCode.unavailable, "this gateway is still reading the "
                             f"run-owners and runs topics, which say whose runs {what} hold; "
                             "retry in a moment")
    return tenant


def runs_of(gateway: Gateway, run_ids: frozenset[str], tenant: str,
            named: str | None = None) -> bool:
    """Whether the runs are ``tenant``'s (a run's owner on ``run-owners``, else its state's
    tenant on ``runs``): who may see an eval result, and the decisions resting on it. A record
    that names its tenant (``named``: the tenant ``eval run`` ran as) is that tenant's unless
    one of its runs is known to be another's; one that names none, only when each run is the
    tenant's. No runs: no tenant's."""
    if not run_ids:
        return False
    if named is not None:
        return named == tenant and all(gateway.owner_of(run_id) in (None, tenant)
                                       for run_id in run_ids)
    return all(gateway.owner_of(run_id) == tenant for run_id in run_ids)


def by_id_or_prefix(visible: dict[str, Record], reference: str, view: TopicView,
                    what: str) -> Record:
    """The record of id ``reference``, or of the one id it begins: 422 for several, 404 for
    none (503 while ``view`` has not read its topic to the end it had at the start)."""
    found = visible.get(reference)
    if found is not None:
        return found
    matches = [key for key in visible if key.startswith(reference)]
    if len(matches) > 1:
        raise GatewayProblem(ProblemCode.invalid_input, f"{reference!r} names {len(matches)} "
                             f"{what}s; give more of the id")
    if not matches:
        topic = view.topic.removeprefix(view.settings.topic_prefix)
        if not view.caught_up.is_set():
            raise GatewayProblem(ProblemCode.unavailable, "this gateway is still reading the "
                                 f"{topic} topic; retry in a moment")
        raise GatewayProblem(ProblemCode.not_found, f"no {what} {reference!r} on the {topic} "
                             "topic (that this caller may see)")
    return visible[matches[0]]
