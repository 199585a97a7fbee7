"""A new decision from a bundle and the eval results behind it, and a decision's demoted
revision.

The eval results must all be of the decision's bundle (a decision rests on evidence about what
it decides). Availability sums them: error and refusal rates are errors and refusals over runs;
the recorded unknown-event and needs_reconciliation rates are the results' means weighted by
runs. Required capabilities default to what the bundle uses (tools, structured output) plus
those named with ``--require``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Sequence

from modelevents.schemas.bundles import Bundle
from modelevents.schemas.decision_record import (
    Availability,
    Decision,
    DecisionTarget,
    Demotion,
)
from modelevents.schemas.errors import InputError
from modelevents.services.migration.decisions.eval_results import EvalSummary
from modelevents.services.migration.decisions.triggers import triggers_of

__all__ = ["new_decision", "demoted", "DECISION_ID_PREFIX"]

DECISION_ID_PREFIX = "dec-"


def _weighted(results: list[EvalSummary], name: str) -> float | None:
    known = [(getattr(r, name), r.runs) for r in results if getattr(r, name) is not None]
    if not known:
        return None
    runs = sum(weight for _, weight in known)
    if runs == 0:
        return sum(rate for rate, _ in known) / len(known)
    return sum(rate * weight for rate, weight in known) / runs


def _required(bundle: Bundle, extra: list[str]) -> list[str]:
    needed = set(extra)
    if bundle.tools:
        needed.add("tools")
    if bundle.sampling.structured_output is not None:
        needed.add("structured_output")
    return sorted(needed)


def new_decision(bundle: Bundle, results: list[EvalSummary], *, owner: str,
                 exceptions: Sequence[str] = (), evidence: Sequence[str] = (),
                 require: Sequence[str] = (), now_ms: int | None = None) -> Decision:
    """Revision 0, ``current``. InputError when no result is given, or one is of another
    bundle."""
    if not owner.strip():
        raise InputError("a decision needs an owner: --owner NAME")
    if not results:
        raise InputError("a decision rests on eval results: give --eval RESULT at least once")
    others = [r for r in results if r.bundle_id != bundle.bundle_id]
    if others:
        raise InputError(
            f"eval result {others[0].result_id} is of bundle {others[0].bundle_id}, not of "
            f"{bundle.bundle_id} ({bundle.name}): a decision rests on results of its own bundle")
    runs = sum(r.runs for r in results)
    at = now_ms if now_ms is not None else int(time.time() * 1000)
    seed = "\n".join([bundle.bundle_id, owner, str(at), *sorted(r.result_id for r in results)])
    return Decision(
        decision_id=DECISION_ID_PREFIX + hashlib.sha256(seed.encode()).hexdigest()[:32],
        revision=0, bundle_id=bundle.bundle_id, bundle_name=bundle.name,
        target=DecisionTarget(bundle.target.provider, bundle.target.api, bundle.target.model,
                              bundle.target.snapshot),
        required_capabilities=_required(bundle, list(require)),
        availability=Availability(
            runs=runs, rejected=sum(r.rejected for r in results),
            error_rate=sum(r.errors for r in results) / runs if runs else 0.0,
            refusal_rate=sum(r.refusals for r in results) / runs if runs else 0.0),
        evidence=list(evidence), eval_results=[r.result_id for r in results],
        exceptions=list(exceptions), owner=owner,
        triggers=triggers_of(
            bundle, unknown_event_rate=_weighted(results, "unknown_event_rate"),
            needs_reconciliation_rate=_weighted(results, "needs_reconciliation_rate")),
        status="current", decided_at=at, updated_at=at)


def demoted(decision: Decision, demotion: Demotion) -> Decision:
    """The next revision: historical evidence, with why and on what evidence."""
    return dataclasses.replace(decision, revision=decision.revision + 1, status="historical",
                               updated_at=demotion.at, demotion=demotion)
