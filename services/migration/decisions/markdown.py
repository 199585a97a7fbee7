"""The decision as a Markdown file with YAML front matter (``decide --out FILE``): the front
matter is the record itself (every field, machine-readable), the body says it for a reader."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import yaml

from modelevents.schemas.decision_record import Decision

__all__ = ["render", "write"]


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _items(values: list[str]) -> list[str]:
    return [f"- {v}" for v in values] or ["- (none)"]


def render(decision: Decision) -> str:
    front = yaml.safe_dump(decision.as_dict(), sort_keys=False, allow_unicode=True)
    t, a, tr = decision.target, decision.availability, decision.triggers
    adapters = ", ".join(f"{k}={v}" for k, v in tr.event_adapters.items()) or "(any)"
    tools = ", ".join(f"{k}@{v}" for k, v in tr.tool_contracts.items()) or "(none)"
    lines = [
        "---", front.rstrip(), "---", "",
        f"# Decision {decision.decision_id}: {decision.bundle_name}", "",
        f"**Status:** {decision.status} (revision {decision.revision}, "
        f"updated {_when(decision.updated_at)})  ",
        f"**Bundle:** `{decision.bundle_id}`  ",
        f"**Target:** {t.provider} / {t.api} / {t.model}"
        f"{f' (snapshot {t.snapshot})' if t.snapshot else ''}  ",
        f"**Owner:** {decision.owner}, decided {_when(decision.decided_at)}", "",
    ]
    if decision.demotion is not None:
        d = decision.demotion
        where = (f"{d.topic} partition {d.partition} offset {d.offset}"
                 if d.topic is not None else "the capability manifest")
        lines += ["## Demoted to historical evidence", "",
                  f"{d.reason} (trigger `{d.trigger}`, {_when(d.at)}): expected "
                  f"`{d.expected}`, observed `{d.observed}`; evidence: run {d.run_id}, event "
                  f"{d.event_id}, {where}.", ""]
    lines += ["## Evidence", "",
              f"Eval results: {', '.join(decision.eval_results)} — {a.runs} runs, {a.rejected} "
              f"rejected by a hard gate; error rate {a.error_rate:.2%}, refusal rate "
              f"{a.refusal_rate:.2%}.", "", *_items(decision.evidence), "",
              "## Required capabilities", "", *_items(decision.required_capabilities), "",
              "## Exceptions", "", *_items(decision.exceptions), "",
              "## Retest triggers", "",
              f"- model snapshot: {tr.model_snapshot or '(any)'}",
              f"- event adapters: {adapters}",
              f"- event schema: {tr.event_schema or '(any)'}",
              f"- tool contracts: {tools}",
              f"- capability manifest entry: {'recorded' if tr.capabilities else '(none)'}",
              f"- unknown-event rate above: {tr.unknown_event_rate}",
              f"- needs_reconciliation rate above: {tr.needs_reconciliation_rate}", ""]
    return "\n".join(lines)


def write(decision: Decision, path: Path) -> None:
    path.write_text(render(decision), encoding="utf-8")
