"""An eval result as text (services/migration/eval/report.py): gates table first, the rejected
count beside every figure, rejected runs with their evidence."""

from __future__ import annotations

import json
from pathlib import Path

from modelevents.services.migration.eval.report import render, render_comparison
from modelevents.services.migration.eval.result import comparison, scored_runs

RECORD = json.loads((Path(__file__).parent / "samples" / "eval_result.v1.json").read_text())


def test_the_gates_come_before_any_figure():
    text = render(RECORD)
    assert text.index("HARD GATES") < text.index("task_success")


def test_every_figure_line_says_how_many_runs_were_rejected():
    lines = [line for line in render(RECORD).splitlines() if "task_success" in line]
    assert lines and all("rejected" in line for line in lines)


def test_a_rejected_run_is_shown_with_its_gate_evidence():
    text = render(RECORD)
    assert "REJECTED RUNS (1)" in text
    assert "invalid_schema: tool call call_eval_time to get_time" in text


def test_a_comparison_rebuilt_from_the_runs_of_a_result_matches_the_recorded_one():
    a, b = (bundle["bundle"] for bundle in RECORD["bundles"])
    rebuilt = comparison(scored_runs(RECORD, a), scored_runs(RECORD, b))
    assert rebuilt == RECORD["comparisons"][0]["figures"]
    text = render_comparison({"a": {"result_id": "r1", "bundle": a},
                              "b": {"result_id": "r1", "bundle": b}, "figures": rebuilt})
    assert "rejected 0 vs 1" in text
