"""A run request under a bundle: the fields it leaves out filled from the bundle, and a request
that says otherwise than its bundle refused.

A bundle (``schemas/bundles.py``) fixes the target (provider, API, model), the instruction text,
the tools and the sampling settings. For each, a request that names a bundle may leave the field
out — it is taken from the bundle — or give the bundle's own value; any other value is a
contradiction, answered 422 ``bundle_mismatch`` with each field at fault in ``conflicts``, so no
run is ever recorded under a bundle it did not run under. A target without ``api`` matches the
bundle's provider and model and gets its API. A bundle that names no structured output leaves
it to each request (an eval task's extraction schema is the task's, not the bundle's); one that
names it fixes it like the rest. ``preferences`` (a ranked list of targets) cannot
go with a bundle, which names one. The transcript and the run's own options (run id, tenant,
session, stream, background, hosted tools, capabilities) are the request's.

More on this module: docs/migration.md "Bundles", docs/gateway-api.md.
"""

from __future__ import annotations

from typing import Any

from modelevents.schemas.bundles import Bundle
from modelevents.schemas.transcript import NeutralRequest, Target
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["apply_bundle"]


def _target(request: NeutralRequest, bundle: Bundle) -> tuple[Target, list[dict[str, Any]]]:
    want = bundle.target
    fixed = Target(provider=want.provider, api=want.api, model=want.model)
    if request.preferences:
        return fixed, [{"field": "preferences", "request": [t.label() for t in
                                                             request.preferences],
                        "bundle": fixed.label(),
                        "why": "a bundle names one target; leave preferences out"}]
    given = request.target
    if given is None:
        return fixed, []
    conflicts = [{"field": f"target.{name}", "request": getattr(given, name),
                  "bundle": getattr(want, name)}
                 for name in ("provider", "api", "model")
                 if getattr(given, name) is not None and getattr(given, name) != getattr(want,
                                                                                          name)]
    return fixed, conflicts


def _as_json(value: Any) -> Any:
    return value.model_dump(mode="json", by_alias=True) if hasattr(value, "model_dump") else value


def _filled(request: NeutralRequest, bundle: Bundle
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    target, conflicts = _target(request, bundle)
    fills: dict[str, Any] = {"target": target, "preferences": []}
    sampling = bundle.sampling
    wanted: dict[str, Any] = {
        "instructions": bundle.instruction.text,
        "tools": [t.declaration for t in bundle.tools],
        "temperature": sampling.temperature,
        "max_output_tokens": sampling.max_output_tokens,
        "structured_output": sampling.structured_output,
    }
    for name, value in wanted.items():
        given = getattr(request, name)
        if name == "structured_output" and value is None:
            continue  # the bundle leaves it to the request (module docstring)
        if given is None or (name == "tools" and not given):
            fills[name] = value
        elif name == "tools":
            if sorted(given, key=lambda t: t.name) != sorted(value, key=lambda t: t.name):
                conflicts.append({"field": "tools", "request": sorted(t.name for t in given),
                                  "bundle": sorted(t.name for t in value),
                                  "why": "the declarations differ from the bundle's tool "
                                         "contracts; leave tools out to take the bundle's"})
        elif given != value:
            conflicts.append({"field": name, "request": _as_json(given),
                              "bundle": _as_json(value)})
    return fills, conflicts


def apply_bundle(request: NeutralRequest, bundle: Bundle) -> NeutralRequest:
    """``request`` with the fields it leaves out taken from ``bundle``; GatewayProblem
    ``bundle_mismatch`` when it contradicts it (module docstring)."""
    fills, conflicts = _filled(request, bundle)
    if conflicts:
        fields = ", ".join(c["field"] for c in conflicts)
        raise GatewayProblem(
            ProblemCode.bundle_mismatch,
            f"the request contradicts bundle {bundle.bundle_id} ({bundle.name!r}) in {fields}; "
            "leave those fields out to take the bundle's values, or create another bundle",
            bundle=bundle.bundle_id, conflicts=conflicts)
    # model_copy skips validation: what is filled comes from a validated bundle.
    return request.model_copy(update=fills)
