"""The policy the executor asks before every call: a tool description grants nothing.

For each tenant (the identity a run belongs to, from its events): which tools it may call, on
which objects (``scopes``: tool name → the object scopes it may touch; a tool whose contract
names a scope and is not listed may touch none), a budget of calls and cost per run and per
tenant, whether write tools need an approval, and whether the executor continues the run through
the gateway (``auto_continue`` with ``continue_target``) or leaves that to the application.

A tenant the policy does not name may call nothing; a call is asked about when it is proposed
and again when its approval is granted, and holds its place in the budgets until it is charged.

More on this module: docs/tools.md, ``consumers/tools/policy.py``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from modelevents.consumers.tools.contract import ToolContract
from modelevents.schemas.errors import ConfigError

__all__ = ["TenantPolicy", "Policy", "Decision"]


@dataclass
class TenantPolicy:
    tools: set[str] | None = None
    scopes: dict[str, set[str]] = field(default_factory=dict)
    max_calls_per_run: int | None = None
    max_calls_per_tenant: int | None = None
    max_cost_per_run: float | None = None
    max_cost_per_tenant: float | None = None
    approve_writes: bool = True
    auto_continue: bool = False
    continue_target: dict[str, str] | None = None
    gateway_token: str | None = None


@dataclass(frozen=True)
class Decision:
    verdict: str  # allow | deny | approve (allowed once an approval grants it)
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.verdict == "allow"


@dataclass
class Policy:
    tenants: dict[str, TenantPolicy] = field(default_factory=dict)
    calls_by_run: Counter[str] = field(default_factory=Counter)
    calls_by_tenant: Counter[str] = field(default_factory=Counter)
    cost_by_run: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    cost_by_tenant: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    # Admitted and not charged yet: what check() counts beside what was spent.
    held_by_run: Counter[str] = field(default_factory=Counter)
    held_by_tenant: Counter[str] = field(default_factory=Counter)
    held_cost_by_run: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    held_cost_by_tenant: defaultdict[str, float] = field(
        default_factory=lambda: defaultdict(float))

    @classmethod
    def from_file(cls, path: Path) -> Policy:
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"--policy {path}: {exc}") from exc
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Policy:
        tenants: dict[str, TenantPolicy] = {}
        for name, spec in (raw.get("tenants") or {}).items():
            spec = dict(spec or {})
            # Hosted tools run at the provider: the gateway and the worker read that section
            # (services/policy/hosted.py); the executor has nothing to do with it.
            spec.pop("hosted", None)
            if spec.get("tools") is not None:
                spec["tools"] = set(spec["tools"])
            spec["scopes"] = {tool: set(s) for tool, s in (spec.get("scopes") or {}).items()}
            try:
                tenants[name] = TenantPolicy(**spec)
            except TypeError as exc:
                raise ConfigError(f"policy of tenant {name!r}: {exc}") from exc
        return cls(tenants=tenants)

    def tenant(self, tenant: str) -> TenantPolicy | None:
        return self.tenants.get(tenant)

    def check(self, tenant: str, run_id: str, contract: ToolContract,
              arguments: dict[str, Any]) -> Decision:
        """May ``tenant`` call ``contract`` with ``arguments`` in run ``run_id`` now?"""
        rules = self.tenants.get(tenant)
        if rules is None:
            return Decision("deny", f"tenant {tenant!r} may not call tools")
        if rules.tools is not None and contract.name not in rules.tools:
            return Decision("deny", f"tool {contract.name!r} is not allowed for this tenant")
        scope = contract.scope(arguments) if contract.scope else None
        if scope is not None and scope not in rules.scopes.get(contract.name, set()):
            return Decision("deny", f"{contract.name!r} may not act on {scope!r}: that scope "
                                    "is not granted (or was revoked)")
        over = self._over_budget(rules, tenant, run_id, contract.cost)
        if over:
            return Decision("deny", f"budget exhausted: {over}")
        if contract.action == "write" and rules.approve_writes:
            return Decision("approve", f"{contract.name!r} writes: it needs an approval")
        return Decision("allow")

    def admit(self, tenant: str, run_id: str, contract: ToolContract,
              arguments: dict[str, Any], *, approved: bool = False) -> Decision:
        """:meth:`check`, and a call allowed (``approved``: one an approval granted, asked
        again now) holds its place in the budgets until :meth:`charge` or :meth:`release`."""
        decision = self.check(tenant, run_id, contract, arguments)
        if decision.verdict == "allow" or (approved and decision.verdict == "approve"):
            self.held_by_run[run_id] += 1
            self.held_by_tenant[tenant] += 1
            self.held_cost_by_run[run_id] += contract.cost
            self.held_cost_by_tenant[tenant] += contract.cost
            return Decision("allow")
        return decision

    def release(self, tenant: str, run_id: str, cost: float) -> None:
        """Give back the place of an admitted call that was not charged (it never ran)."""
        if self.held_by_run[run_id] > 0:
            self._unhold(tenant, run_id, cost)

    def _unhold(self, tenant: str, run_id: str, cost: float) -> None:
        for counter, key in ((self.held_by_run, run_id), (self.held_by_tenant, tenant)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
        for costs, key in ((self.held_cost_by_run, run_id), (self.held_cost_by_tenant, tenant)):
            costs[key] -= cost
            if costs[key] <= 1e-9:
                del costs[key]

    def _over_budget(self, rules: TenantPolicy, tenant: str, run_id: str, cost: float) -> str:
        if rules.max_calls_per_run is not None and \
                self.calls_by_run[run_id] + self.held_by_run[run_id] >= rules.max_calls_per_run:
            return f"{rules.max_calls_per_run} tool calls per run"
        if rules.max_calls_per_tenant is not None and \
                self.calls_by_tenant[tenant] + self.held_by_tenant[tenant] \
                >= rules.max_calls_per_tenant:
            return f"{rules.max_calls_per_tenant} tool calls for this tenant"
        if rules.max_cost_per_run is not None and self.cost_by_run[run_id] \
                + self.held_cost_by_run.get(run_id, 0.0) + cost > rules.max_cost_per_run:
            return f"cost {rules.max_cost_per_run} per run"
        if rules.max_cost_per_tenant is not None and self.cost_by_tenant[tenant] \
                + self.held_cost_by_tenant.get(tenant, 0.0) + cost > rules.max_cost_per_tenant:
            return f"cost {rules.max_cost_per_tenant} for this tenant"
        return ""

    def charge(self, tenant: str, run_id: str, cost: float) -> None:
        """Count one call that ran (and what it cost) against the budgets; an admitted call's
        held place becomes this charge."""
        if self.held_by_run[run_id] > 0:
            self._unhold(tenant, run_id, cost)
        self.calls_by_run[run_id] += 1
        self.calls_by_tenant[tenant] += 1
        self.cost_by_run[run_id] += cost
        self.cost_by_tenant[tenant] += cost

    def revoke(self, tenant: str, tool: str, scope: str) -> None:
        rules = self.tenants.get(tenant)
        if rules is not None:
            rules.scopes.get(tool, set()).discard(scope)
