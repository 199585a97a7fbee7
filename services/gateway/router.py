"""Which provider API and model a neutral request goes to, decided before anything is sent.

DESIGN.md "Edge": a request declares required and preferred capabilities; the router rejects
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
from modelevents.services.gateway.capabilities import Capabilities, Manifest


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

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "api": self.api, "model": self.model}
        if self.reason:
            out["reason"] = self.reason
        if self.missing:
            out["missing"] = [{"capability": m.capability, "because": m.because}
                              for m in self.missing]
        return out

    def describe(self) -> str:
        where = f"{self.provider}/{self.api or '*'}/{self.model}"
        if self.reason:
            return f"{where}: {self.reason}"
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
    return needs


def route(request: NeutralRequest, manifest: Manifest,
          available: set[str] | None = None) -> Route:
    """The best compatible candidate, or ``CapabilityRejected`` naming what each one lacks.

    ``available``: the providers this gateway can call (None: all); a candidate of another
    provider is rejected as such, so a preference list falls through to the next one."""
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
                    f"{target.provider}/{api}; add it to {manifest.source}")))
                continue
            offered = resolved.capabilities.names()
            missing = tuple(Missing(name, because) for name, because in needs.items()
                            if name not in offered)
            if missing:
                rejections.append(Rejection(target.provider, api, target.model, missing))
                continue
            met = tuple(name for name in request.preferred_capabilities if name in offered)
            compatible.append((-len(met), order, Route(target.provider, api, target.model,
                                                       resolved.capabilities, met)))
            order += 1
    if not compatible:
        raise CapabilityRejected(rejections)
    return min(compatible, key=lambda c: (c[0], c[1]))[2]
