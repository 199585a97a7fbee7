"""Which provider API and model a neutral request goes to, decided before anything is sent.

A request (docs/gateway-api.md) declares required and preferred capabilities; the router rejects
incompatible targets. What a request requires:

- its ``required_capabilities``;
- what its transcript needs: an image part needs ``input.image``, a file part ``input.file``
  (``input.audio`` for audio media types), tool calls/results or declared tools ``tools``;
- ``background: true`` needs ``background``; ``structured_output`` needs ``structured_output``.

Candidates are the request's ``target`` or its ``preferences``, in order; a target without an
``api`` expands to each of the provider's APIs in manifest order. Among the compatible
candidates the one meeting the most ``preferred_capabilities`` wins; ties go to the earlier
candidate (the caller's ranking). When none is compatible, ``CapabilityRejected`` lists every
candidate with exactly what it lacks and why the request needs it — the gateway answers 422
with ``CapabilityRejected.to_dict()``.

Each enabled hosted tool (``hosted_tools``) requires ``hosted_tools.<type>``. Under the
tenant's hosted-tool policy, ``admit`` refuses what no target may send and merges the
tenant's domain rules into the request; ``route`` then also refuses a candidate that cannot
enforce them (``egress.py``). Those candidates carry ``refused`` (rule, because) instead of
``missing``, in the same 422 (code ``egress_rejected``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelevents.schemas.transcript import (
    FilePart,
    ImagePart,
    NeutralRequest,
    ToolCallPart,
    ToolResultPart,
)
from modelevents.services.errors import CapabilityRejected
from modelevents.services.gateway.calls.capabilities import Capabilities, Manifest
from modelevents.services.gateway.calls.egress import Refusal, apply_policy, target_refusals
from modelevents.services.policy.hosted import HostedPolicy


@dataclass(frozen=True, slots=True)
class Missing:
    capability: str
    because: str  # why the request needs it


@dataclass(frozen=True, slots=True)
class Rejection:
    """One candidate that cannot take the request."""

    provider: str
    api: str | None
    model: str
    missing: tuple[Missing, ...] = ()
    reason: str | None = None  # when the target is not in the manifest at all
    refused: tuple[Refusal, ...] = ()  # egress: the hosted-tool policy or rules it cannot enforce

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "api": self.api, "model": self.model}
        if self.reason:
            out["reason"] = self.reason
        if self.missing:
            out["missing"] = [{"capability": m.capability, "because": m.because}
                              for m in self.missing]
        if self.refused:
            out["refused"] = [r.to_dict() for r in self.refused]
        return out

    def describe(self) -> str:
        where = f"{self.provider}/{self.api or '*'}/{self.model}"
        if self.reason:
            return f"{where}: {self.reason}"
        if self.refused:
            return f"{where} refused: " + "; ".join(r.because for r in self.refused)
        lacks = "; ".join(f"{m.capability} (needed: {m.because})" for m in self.missing)
        return f"{where} lacks {lacks}"


@dataclass(frozen=True, slots=True)
class Route:
    provider: str
    api: str
    model: str
    capabilities: Capabilities
    preferred_met: tuple[str, ...] = field(default=())


def requirements(request: NeutralRequest) -> dict[str, str]:
    """Capability → why the request needs it (the first reason found)."""
    needs: dict[str, str] = {}
    for name in request.required_capabilities:
        needs.setdefault(name, "listed in required_capabilities")
    for m_index, message in enumerate(request.transcript):
        for p_index, part in enumerate(message.parts):
            where = f"transcript[{m_index}].parts[{p_index}]"
            if isinstance(part, ImagePart):
                needs.setdefault("input.image", f"{where} is an image")
            elif isinstance(part, FilePart):
                needs.setdefault(f"input.{part.modality}",
                                 f"{where} is a {part.modality} ({part.media_type or 'file'})")
            elif isinstance(part, (ToolCallPart, ToolResultPart)):
                needs.setdefault("tools", f"{where} is a {part.type}")
    if request.tools:
        needs.setdefault("tools", f"the request declares {len(request.tools)} application tools")
    if request.background:
        needs.setdefault("background", "background is true")
    if request.structured_output is not None:
        needs.setdefault("structured_output", "structured_output is set")
    for index, tool in enumerate(request.hosted_tools):
        needs.setdefault(f"hosted_tools.{tool.type}", f"hosted_tools[{index}] enables it")
    return needs


def admit(request: NeutralRequest, policy: HostedPolicy | None) -> NeutralRequest:
    """The request under the tenant's hosted-tool policy (its domain rules merged in), or
    ``CapabilityRejected`` with every candidate refused alike: what the policy forbids is
    forbidden on any target."""
    admitted, refusals = apply_policy(request, policy)
    if refusals:
        raise CapabilityRejected([Rejection(t.provider, t.api, t.model, refused=refusals)
                                  for t in request.targets])
    return admitted


def route(request: NeutralRequest, manifest: Manifest, available: set[str] | None = None,
          policy: HostedPolicy | None = None) -> Route:
    """The best compatible candidate, or ``CapabilityRejected`` naming what each one lacks.

    ``available``: the providers this gateway can call (None: all); a candidate of another
    provider is rejected as such, so a preference list falls through to the next one.
    ``policy``: the tenant's hosted-tool policy (the request already ``admit``-ted under it);
    a candidate that cannot enforce it, or the request's own domain rules, is refused."""
    needs = requirements(request)
    rejections: list[Rejection] = []
    compatible: list[tuple[int, int, Route]] = []
    order = 0
    for target in request.targets:
        apis = [target.api] if target.api else manifest.apis_of(target.provider)
        if not apis:
            rejections.append(Rejection(target.provider, target.api, target.model, reason=(
                f"provider {target.provider!r} is not in the capability manifest "
                f"(known: {', '.join(manifest.providers())})")))
            continue
        if available is not None and target.provider not in available:
            rejections.append(Rejection(target.provider, target.api, target.model, reason=(
                f"provider {target.provider!r} is not configured on this gateway (no API key "
                "or base URL for it in the gateway config)")))
            continue
        for api in apis:
            resolved = manifest.lookup(target.provider, api, target.model)
            if resolved is None:
                rejections.append(Rejection(target.provider, api, target.model, reason=(
                    f"model {target.model!r} is not in the capability manifest for "
                    f"{target.provider}/{api}; add it to the gateway's capability manifest "
                    "(its `capabilities` setting names the file)")))
                continue
            offered = resolved.capabilities.names()
            missing = tuple(Missing(name, because) for name, because in needs.items()
                            if name not in offered)
            if missing:
                rejections.append(Rejection(target.provider, api, target.model, missing))
                continue
            refused = target_refusals(request, api, policy)
            if refused:
                rejections.append(Rejection(target.provider, api, target.model,
                                            refused=refused))
                continue
            met = tuple(name for name in request.preferred_capabilities if name in offered)
            compatible.append((-len(met), order, Route(target.provider, api, target.model,
                                                       resolved.capabilities, met)))
            order += 1
    if not compatible:
        raise CapabilityRejected(rejections)
    return min(compatible, key=lambda c: (c[0], c[1]))[2]
