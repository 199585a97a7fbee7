"""Egress of provider-hosted tools, decided before anything is sent (docs/hosted-tools.md).

Two steps, both answered with the router's 422 (``CapabilityRejected``, code
``egress_rejected``, every candidate with what ``refused`` it):

1. ``apply_policy`` — the tenant's ``hosted:`` policy (``services/policy/hosted.py``) against
   the request, whatever the target: each hosted tool must be one the tenant may use, an MCP
   server one on its list (label and URL), a sandbox with network only where ``code_network``
   allows it. The policy's domains are merged into the request's own: allowed domains are the
   intersection (the request can only narrow what the tenant allows; a domain covers its
   subdomains, so ``docs.python.org`` is what remains of ``python.org`` ∩ ``docs.python.org``),
   blocked domains the union, and an allowed domain that a blocked one covers is dropped.
   Nothing left to allow is a refusal, never "allow anywhere".
2. ``target_refusals`` — per candidate target (the router calls it): can that API enforce what
   the request now says? A domain rule it cannot render (the renderer's ``HOSTED`` table,
   ``adapters/requests/``), or — under ``code_network: false`` — a sandbox it cannot keep off
   the network, refuses that target; a ranked preference list falls through to the next one.
   The URL-reading tools without domain fields (``url_context``, ``computer``) are refused
   wherever the tenant has domain rules: no API enforces them for those.

Without a policy file (``policy`` None) step 1 changes nothing and step 2 only checks the
request's own domain rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelevents.adapters.requests import RENDERERS
from modelevents.adapters.requests.base import SANDBOXES, WEB_TOOLS, domain_problem
from modelevents.schemas.domains import covered
from modelevents.schemas.hosted_tools import HostedTool, McpTool
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.policy.hosted import HostedPolicy, mcp_url_key

__all__ = ["Refusal", "apply_policy", "target_refusals"]


@dataclass(frozen=True, slots=True)
class Refusal:
    rule: str  # what refused: hosted.tools, hosted.mcp_servers, hosted.code_network, domains
    because: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "because": self.because}


def apply_policy(request: NeutralRequest, policy: HostedPolicy | None
                 ) -> tuple[NeutralRequest, tuple[Refusal, ...]]:
    """The request with the tenant's domain rules merged in, and what the policy refuses in it
    on any target (empty: allowed)."""
    if policy is None or not request.hosted_tools:
        return request, ()
    refusals: list[Refusal] = []
    tools: list[HostedTool] = []
    for index, tool in enumerate(request.hosted_tools):
        where = f"hosted_tools[{index}] ({tool.type})"
        refusals += _tenant_rules(tool, where, policy)
        merged, refusal = _merged_domains(tool, where, policy)
        tools.append(merged)
        if refusal is not None:
            refusals.append(refusal)
    return request.model_copy(update={"hosted_tools": tools}), tuple(refusals)


def target_refusals(request: NeutralRequest, api: str, policy: HostedPolicy | None
                    ) -> tuple[Refusal, ...]:
    """What ``api`` cannot enforce of the (policy-merged) request's hosted tools."""
    module = RENDERERS.get(api)
    if module is None:
        return ()
    refusals: list[Refusal] = []
    for index, tool in enumerate(request.hosted_tools):
        egress = module.HOSTED.get(tool.type)
        if egress is None:
            continue  # not offered there: the capability check names it
        where = f"hosted_tools[{index}] ({tool.type}) on {api}"
        if tool.type in SANDBOXES and policy is not None and not policy.code_network \
                and egress.network not in ("request", "sandbox"):
            refusals.append(Refusal("hosted.code_network", (
                f"{where}: the API cannot keep the sandbox off the network (no request field, "
                "no documented guarantee), and the tenant's code_network is false")))
        allowed, blocked = _rules_in_force(tool, policy)
        problem = domain_problem(egress, allowed, blocked)
        if problem:
            refusals.append(Refusal("domains", (
                f"{where}: {problem} ({egress.note}); its domain rules (allowed {allowed}, "
                f"blocked {blocked}) would not hold at the provider")))
    return tuple(refusals)


# --- the parts ----------------------------------------------------------------------------------


def _tenant_rules(tool: HostedTool, where: str, policy: HostedPolicy) -> list[Refusal]:
    if tool.type not in policy.tools:
        return [Refusal("hosted.tools", (
            f"{where}: the tenant may not enable {tool.type} (its hosted tools: "
            f"{', '.join(policy.tools) or 'none'})"))]
    out: list[Refusal] = []
    if isinstance(tool, McpTool):
        key = mcp_url_key(tool.server_url)
        if not any(s.label == tool.server_label and mcp_url_key(s.url) == key
                   for s in policy.mcp_servers):
            listed = ", ".join(f"{s.label} {s.url}" for s in policy.mcp_servers) or "none"
            out.append(Refusal("hosted.mcp_servers", (
                f"{where}: MCP server {tool.server_label!r} at {tool.server_url} is not on the "
                f"tenant's list (label and URL; listed: {listed})")))
    if tool.type in SANDBOXES and getattr(tool, "network", False) and not policy.code_network:
        out.append(Refusal("hosted.code_network", (
            f"{where}: asks for network, and the tenant's code_network is false")))
    return out


def _merged_domains(tool: HostedTool, where: str, policy: HostedPolicy
                    ) -> tuple[HostedTool, Refusal | None]:
    if not hasattr(tool, "allowed_domains"):
        return tool, None
    if tool.type in SANDBOXES and not getattr(tool, "network", False):
        return tool, None  # no network: no domains
    own_allowed: list[str] = list(getattr(tool, "allowed_domains", ()))
    own_blocked: list[str] = list(getattr(tool, "blocked_domains", ()))
    blocked = list(dict.fromkeys([*own_blocked, *policy.blocked_domains]))
    allowed = [d for d in _intersection(own_allowed, list(policy.allowed_domains))
               if not covered(d, blocked)]
    update: dict[str, list[str]] = {"allowed_domains": allowed}
    if hasattr(tool, "blocked_domains"):
        # A blocked domain inside no allowed one is kept out by the allowlist already.
        update["blocked_domains"] = [b for b in blocked if not allowed or covered(b, allowed)]
    merged = tool.model_copy(update=update)
    if (own_allowed or policy.allowed_domains) and not allowed:
        return merged, Refusal("hosted.allowed_domains", (
            f"{where}: no domain is left that both the request (allowed {own_allowed or 'any'}) "
            f"and the tenant (allowed {list(policy.allowed_domains) or 'any'}, blocked "
            f"{list(policy.blocked_domains)}) allow"))
    return merged, None


def _intersection(mine: list[str], theirs: list[str]) -> list[str]:
    """Domains both lists allow (an empty list allows any), the narrower of each pair, no
    domain covered by another one kept."""
    if not mine or not theirs:
        return list(mine or theirs)
    both = [d for d in mine if covered(d, theirs)] + [d for d in theirs if covered(d, mine)]
    unique = list(dict.fromkeys(both))
    return [d for d in unique if not covered(d, [o for o in unique if o != d])]


def _rules_in_force(tool: HostedTool, policy: HostedPolicy | None
                    ) -> tuple[list[str], list[str]]:
    """The allowed and blocked domains the target must enforce for ``tool``."""
    if tool.type in SANDBOXES:
        if not getattr(tool, "network", False):
            return [], []
        # A sandbox takes only an allowlist; the tenant's blocked domains still bind it.
        return (list(getattr(tool, "allowed_domains", ())),
                list(policy.blocked_domains) if policy else [])
    if hasattr(tool, "allowed_domains"):
        return list(getattr(tool, "allowed_domains", ())), list(getattr(tool, "blocked_domains",
                                                                          ()))
    if tool.type in WEB_TOOLS and policy is not None:
        return list(policy.allowed_domains), list(policy.blocked_domains)
    return [], []
