"""An eval result as text for a terminal: the gates table first, then the figures of accepted runs
(each with its interval, the runs it counts and the rejected beside it), the paired comparison,
and the rejected runs with the evidence of each gate they failed."""

from __future__ import annotations

import datetime as dt
from typing import Any

from modelevents.services.migration.eval.gates import GATES

_UNITS = {"task_success": "{:.0%}", "time_to_verified_ms": "{:,.0f} ms",
          "unit_cost": "{:.6f}", "approvals_per_run": "{:.2f}"}


def _number(name: str, value: float | None) -> str:
    if value is None:
        return "—"
    return _UNITS.get(name, "{:,.1f}").format(value)


def _signed(name: str, value: float | None) -> str:
    if value is None:
        return "—"
    text = _number(name, abs(value))
    return ("+" if value >= 0 else "−") + text


def _label(bundle: dict[str, Any]) -> str:
    short = bundle["bundle"][:16]
    return f"{bundle['name']} ({short})" if bundle.get("name") else short


def _paired(a: str, b: str, figures: list[dict[str, Any]]) -> list[str]:
    lines = [f"PAIRED by task: {a[:16]} − {b[:16]} (accepted runs of tasks both have)"]
    for f in figures:
        interval = ("" if f["low"] is None else
                    f" [{_signed(f['name'], f['low'])} … {_signed(f['name'], f['high'])}]")
        lines.append(f"  {f['name']:<22} {_signed(f['name'], f['difference']):>14}{interval}"
                     f"  ({f['tasks']} tasks; rejected {f['rejected_a']} vs {f['rejected_b']})")
    return lines


def render_comparison(doc: dict[str, Any]) -> str:
    """``eval compare``: A and B (result and bundle each), then the paired figures."""
    return "\n".join([f"A: {doc['a']['bundle']} of {doc['a']['result_id']}",
                      f"B: {doc['b']['bundle']} of {doc['b']['result_id']}", "",
                      *_paired(doc["a"]["bundle"], doc["b"]["bundle"], doc["figures"])])


def render(record: dict[str, Any], *, rejected_runs: int = 20) -> str:
    when = dt.datetime.fromtimestamp(record["created_at"] / 1000, dt.UTC)
    lines = [f"eval result {record['result_id']}",
             f"corpus {record['corpus']} · {record['mode']} · {when:%Y-%m-%d %H:%M:%S} UTC", "",
             "HARD GATES (a run failing any is rejected, whatever its score)"]
    header = ["bundle", "runs", "not started", "accepted", "rejected", *GATES]
    rows = [[_label(b), str(b["runs"]), str(len(b["not_started"])), str(b["accepted"]),
             str(b["rejected"]),
             *(str(b["gate_failures"].get(g, 0)) for g in GATES)] for b in record["bundles"]]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)))
    for bundle in record["bundles"]:
        lines += ["", f"{_label(bundle)} — accepted runs only",
                  f"  model snapshots: {', '.join(bundle['model_snapshots']) or '—'}",
                  f"  adapters: {', '.join(bundle['api_revisions']) or '—'}",
                  f"  errors {bundle['error_runs']} · refusals {bundle['refusal_runs']} · "
                  f"unknown events {bundle['unknown_event_rate']:.0%} of runs · "
                  f"needs_reconciliation {bundle['needs_reconciliation_rate']:.0%} of runs"]
        if bundle["not_started"]:
            lines.append(f"  not started ({len(bundle['not_started'])}): the gateway refused "
                         + "; ".join(bundle["not_started"][:3]))
        if bundle["unpriced"]:
            lines.append(f"  no price for {', '.join(bundle['unpriced'])} (cost left out)")
        for f in bundle["figures"]:
            interval = ("" if f["low"] is None else
                        f" [{_number(f['name'], f['low'])} … {_number(f['name'], f['high'])}]")
            lines.append(f"  {f['name']:<22} {_number(f['name'], f['value']):>14}{interval}"
                         f"  (n={f['n']}, rejected {f['rejected']})")
    for comparison in record["comparisons"]:
        lines += ["", *_paired(comparison["a"], comparison["b"], comparison["figures"])]
    rejected = [r for r in record["runs"] if not r["accepted"]]
    if rejected:
        lines += ["", f"REJECTED RUNS ({len(rejected)})"]
        for run in rejected[:rejected_runs]:
            lines.append(f"  {run['run_id']} ({run['bundle'][:16]}, task {run['task']})")
            lines += [f"    {g['gate']}: {g['evidence']}" for g in run["gates"]]
        if len(rejected) > rejected_runs:
            lines.append(f"  … and {len(rejected) - rejected_runs} more (--json has them all)")
    return "\n".join(lines)
