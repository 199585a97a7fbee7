"""What a probe's run shows about its capability: confirmed, contradicted or inconclusive.

``judge(capability, outcome)`` reads only the run's events (their ``normalize`` projections, as
``GET /v1/runs/{id}/events`` sends them) or the gateway's refusal. The rules, in order:

- the provider said the request is not supported (an ``error`` event of type
  ``invalid_request`` or ``not_found``, or an unclassified one answered 400/404/422) or the
  model refused (a ``refusal`` event): **contradicted** — the claim did not hold for it;
- any other error (authentication, rate limits, server errors) or a run that did not settle:
  **inconclusive** — nothing was learnt of the capability;
- the gateway refused the request itself (its policy, its manifest, a request it cannot render:
  nothing reached the provider): **inconclusive** as well;
- the capability's own sign (``SIGNS``) among the events: **confirmed**; a structured answer
  that fails its schema: **contradicted**;
- otherwise **inconclusive**: the call worked, but the model did not use what was offered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from modelevents.services.migration.probes.record import CapabilityObservation

__all__ = ["Outcome", "judge"]

Events = list[dict[str, Any]]
# Provider errors that say the request as asked is not supported.
_UNSUPPORTED = {"invalid_request", "not_found"}
_UNSUPPORTED_STATUS = {400, 404, 422}  # for an error the adapter could not classify


@dataclass
class Outcome:
    """What one probe request came to."""

    run_id: str | None
    events: Events = field(default_factory=list)
    refused_status: int | None = None  # the gateway's answer to the POST, when not 202
    refused_detail: str | None = None
    unsettled: str | None = None  # why the run was not read to its end


def _kinds(events: Events) -> list[str]:
    return list(dict.fromkeys(e["kind"] for e in events))


def _of(events: Events, kind: str) -> Events:
    return [e for e in events if e["kind"] == kind]


def _completed(events: Events) -> str | None:
    finished = _of(events, "run.finished")
    if finished and finished[-1].get("status") == "completed":
        return "the run finished completed"
    return None


def _tool_call(events: Events) -> str | None:
    calls = _of(events, "tool.call")
    return f"tool.call {calls[0].get('tool_name')!r}" if calls else None


def _parallel(events: Events) -> str | None:
    calls = _of(events, "tool.call")
    return f"{len(calls)} tool.call events in one turn" if len(calls) >= 2 else None


def _structured(events: Events) -> str | None:
    done = _of(events, "structured.done")
    if done:
        return "structured.done valid" if done[-1].get("valid") else None
    # APIs whose adapter has no structured.done: the answer's text must be the JSON object.
    texts = _of(events, "text.done")
    try:
        answer = orjson.loads(texts[-1]["text"]) if texts else None
    except orjson.JSONDecodeError:
        return None
    return "text.done is a JSON object with answer" if isinstance(answer, dict) \
        and "answer" in answer else None


def _reasoning(events: Events) -> str | None:
    if _of(events, "reasoning.done") or _of(events, "reasoning.delta"):
        return "reasoning events"
    tokens = [u.get("reasoning_tokens") or 0 for u in _of(events, "usage")]
    return f"usage.reasoning_tokens {max(tokens)}" if tokens and max(tokens) > 0 else None


def _background(events: Events) -> str | None:
    started = _of(events, "run.started")
    if started and started[0].get("provider_object_id") and _completed(events):
        return (f"provider object {started[0]['provider_object_id']} polled to completed")
    return None


def _cache(events: Events) -> str | None:
    reads = [u["cache_read_tokens"] for u in _of(events, "usage")
             if u.get("cache_read_tokens") is not None]
    return f"usage reports cache_read_tokens ({reads[-1]})" if reads else None


def _citation(events: Events) -> str | None:
    cites = _of(events, "citation")
    return f"{len(cites)} citation events" if cites else None


def _hosted(tool: str) -> Callable[[Events], str | None]:
    def sign(events: Events) -> str | None:
        for event in events:
            if event["kind"] in ("hosted.call", "hosted.result") \
                    and event.get("tool_type") == tool:
                return f"{event['kind']} of tool_type {tool}"
            if event["kind"] == "tool.call" and event.get("tool_name") == tool:
                return f"tool.call of the provider-defined tool {tool}"
        return None
    return sign


# capability → the sign that confirms it (None: the claim holds if the call did not fail).
SIGNS: dict[str, Callable[[Events], str | None]] = {
    "tools": _tool_call,
    "parallel_tool_calls": _parallel,
    "structured_output": _structured,
    "reasoning": _reasoning,
    "background": _background,
    "prompt_caching": _cache,
    "citations": _citation,
}


def _sign(capability: str) -> Callable[[Events], str | None]:
    if capability.startswith("hosted_tools."):
        return _hosted(capability.removeprefix("hosted_tools."))
    return SIGNS.get(capability, _completed)


def _snapshot(events: Events) -> str | None:
    models = [e["model"] for e in events if e.get("model")]
    return models[-1] if models else None


def judge(capability: str, outcome: Outcome) -> CapabilityObservation:
    """The observation of ``capability`` from what its probe request came to."""
    kinds = _kinds(outcome.events)

    def seen(observed: Any, evidence: str, **extra: Any) -> CapabilityObservation:
        return CapabilityObservation(capability, True, observed, evidence, kinds,
                                     outcome.run_id, model_snapshot=_snapshot(outcome.events),
                                     **extra)

    if outcome.refused_status is not None:
        return seen("inconclusive", f"the gateway refused the request itself (HTTP "
                    f"{outcome.refused_status}); nothing reached the provider",
                    error=outcome.refused_detail, http_status=outcome.refused_status)
    errors = _of(outcome.events, "error")
    if errors:
        error = errors[0]
        status, kind = error.get("http_status"), error.get("error_type")
        unsupported = kind in _UNSUPPORTED or (kind == "provider_error"
                                               and status in _UNSUPPORTED_STATUS)
        return seen("contradicted" if unsupported else "inconclusive",
                    f"error event ({error.get('error_type')}"
                    f"{f', HTTP {status}' if status else ''})",
                    error=error.get("message"), http_status=status)
    refusals = _of(outcome.events, "refusal")
    if refusals:
        return seen("contradicted", "refusal event", error=refusals[0].get("text"))
    if outcome.unsettled is not None:
        return seen("inconclusive", outcome.unsettled)
    found = _sign(capability)(outcome.events)
    if found is not None:
        return seen("confirmed", found)
    if capability == "structured_output" and _of(outcome.events, "structured.done"):
        done = _of(outcome.events, "structured.done")[-1]
        return seen("contradicted", "structured.done not valid against the schema",
                    error=done.get("error"))
    return seen("inconclusive", "the call succeeded but showed no sign of the capability")
