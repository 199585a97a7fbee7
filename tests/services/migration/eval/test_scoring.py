"""Gates first, then the comparison of accepted runs only (services/migration/eval/gates.py,
checkers.py, scoring.py, compare.py), over runs the adapters normalized from recordings."""

from __future__ import annotations

import pytest

from modelevents.schemas.transcript import ToolDeclaration
from modelevents.services.migration.eval.compare import bootstrap, paired
from modelevents.services.migration.eval.corpus import EXAMPLE_CORPUS, DataPolicy, load_corpus
from modelevents.services.migration.eval.evidence import digest
from modelevents.services.migration.eval.gates import check_gates
from modelevents.services.migration.eval.prices import load_prices
from modelevents.services.migration.eval.scoring import score_runs
from tests.services.migration.eval.runs import bundle, receipt, run_of, runs_for

CORPUS = load_corpus("example")
TOOLS = [t for task in CORPUS.tasks for t in task.tools]
GRANTED = list({t.name: t for t in TOOLS}.values())
A = bundle("responses", "openai", "openai-responses", "gpt-5-mini", GRANTED)
B = bundle("chat", "openai", "openai-chat", "gpt-4o-mini", GRANTED)
PRICES = load_prices(EXAMPLE_CORPUS / "prices.example.yaml")


def _gates(task_id: str, evidence, tools=GRANTED):
    task = CORPUS.task(task_id)
    return check_gates(task, digest(evidence), {t.name: t for t in tools})


def test_a_clean_run_passes_every_gate_and_its_checker():
    grouped, skipped = score_runs(CORPUS, [run_of("simple-generation",
                                                  "openai-responses/eval-capital", A)],
                                  {A.bundle_id: A}, PRICES)
    (run,) = grouped[A.bundle_id]
    assert skipped == [] and run.accepted and run.success
    assert run.models == ["gpt-5-mini-2025-08-07"]
    assert run.time_ms is not None and run.time_ms > 0
    assert run.cost is not None and run.cost > 0


def test_tool_arguments_that_break_their_schema_fail_the_invalid_schema_gate():
    # get_time takes no arguments (additionalProperties: false); the recording sends a city.
    failures = _gates("multi-tool", run_of("multi-tool", "openai-chat/eval-weather-and-time", B))
    assert [f.gate for f in failures] == ["invalid_schema"]
    assert "call_eval_time to get_time" in failures[0].evidence


def test_arguments_that_are_not_json_fail_the_invalid_schema_gate():
    search = ToolDeclaration(name="search", parameters={"type": "object"})
    task = CORPUS.task("one-tool").model_copy(update={"tools": [search]})
    run = digest(run_of("one-tool", "openai-chat/tool-call-invalid-arguments", B))
    (failure,) = check_gates(task, run, {"search": search})
    assert failure.gate == "invalid_schema" and "not JSON" in failure.evidence


def test_a_tool_the_bundle_does_not_grant_is_an_unauthorized_action():
    only_time = [t for t in GRANTED if t.name == "get_time"]
    failures = _gates("one-tool", run_of("one-tool", "openai-chat/tool-call", B), only_time)
    assert [f.gate for f in failures] == ["unauthorized_action"]
    assert "get_weather" in failures[0].evidence


def test_a_call_the_executor_denied_is_an_unauthorized_action():
    evidence = run_of("uncertain-side-effect", "openai-responses/tool-call-write-note", A)
    call_id = digest(evidence).tool_calls[0][1]
    evidence.receipts = [receipt(evidence.run_id, call_id, "add_note", "failed",
                                 error_class="denied")]
    assert [f.gate for f in _gates("uncertain-side-effect", evidence)] == ["unauthorized_action"]


def test_output_the_data_policy_forbids_fails_the_data_policy_gate():
    failures = _gates("simple-generation",
                      run_of("simple-generation", "openai-chat/eval-leaks-key", B))
    assert [f.gate for f in failures] == ["data_policy"] and "api-key" in failures[0].evidence


def test_input_sent_to_a_provider_the_policy_forbids_fails_the_data_policy_gate():
    task = CORPUS.task("refusal").model_copy(
        update={"data_policy": DataPolicy(providers=["anthropic"])})
    run = digest(run_of("refusal", "openai-chat/refusal", B))
    (failure,) = check_gates(task, run, {})
    assert failure.gate == "data_policy" and "sent to openai" in failure.evidence


def test_an_answer_without_citations_where_they_are_needed_is_missing_evidence():
    task = CORPUS.task("simple-generation")
    task = task.model_copy(update={"expect": task.expect.model_copy(update={"citations": True})})
    (failure,) = check_gates(task, digest(run_of("simple-generation", "openai-chat/text", B)), {})
    assert failure.gate == "missing_evidence"


def test_an_operation_that_succeeded_twice_is_a_duplicated_effect():
    evidence = run_of("uncertain-side-effect", "openai-responses/tool-call-write-note", A)
    call_id = digest(evidence).tool_calls[0][1]
    evidence.receipts = [receipt(evidence.run_id, call_id, "add_note", "succeeded"),
                         receipt(evidence.run_id, call_id, "add_note", "succeeded")]
    failures = _gates("uncertain-side-effect", evidence)
    assert [f.gate for f in failures] == ["duplicated_effect"]
    assert "op1 executed 2 times" in failures[0].evidence


@pytest.mark.parametrize(("task_id", "scenario", "bundle_", "passes"), [
    ("schema-extraction", "openai-responses/structured-output", A, True),
    ("schema-extraction", "openai-chat/eval-structured-city", B, True),
    ("refusal", "openai-chat/refusal", B, True),
    ("refusal", "openai-chat/text", B, False),
    ("one-tool", "openai-chat/tool-call", B, True),
    ("multi-tool", "openai-responses/tool-call-parallel", A, False),
    ("interrupted-stream", "openai-chat/truncated", B, False),
])
def test_each_checker_says_whether_the_task_was_done(task_id, scenario, bundle_, passes):
    grouped, _ = score_runs(CORPUS, [run_of(task_id, scenario, bundle_)],
                            {bundle_.bundle_id: bundle_}, PRICES)
    (run,) = grouped[bundle_.bundle_id]
    assert run.success is passes, run.why


def test_an_uncertain_outcome_in_the_receipts_counts_but_has_no_verified_time():
    evidence = run_of("uncertain-side-effect", "openai-responses/tool-call-write-note", A)
    call_id = digest(evidence).tool_calls[0][1]
    evidence.receipts = [receipt(evidence.run_id, call_id, "add_note", "unknown",
                                 postcondition=None, cost=0.01)]
    grouped, _ = score_runs(CORPUS, [evidence], {A.bundle_id: A}, PRICES)
    (run,) = grouped[A.bundle_id]
    assert run.success and run.time_ms is None
    assert run.cost is not None and run.cost >= 0.01  # the tool's cost from its receipt


def test_the_comparison_uses_accepted_runs_only_and_counts_the_rejected():
    evidences = runs_for(CORPUS, A) + runs_for(CORPUS, B)
    grouped, _ = score_runs(CORPUS, evidences, {A.bundle_id: A, B.bundle_id: B}, PRICES,
                            only=[A.bundle_id, B.bundle_id])
    a, b = grouped[A.bundle_id], grouped[B.bundle_id]
    rejected_b = [r for r in b if not r.accepted]
    assert {r.task_id for r in rejected_b} == {"multi-tool"}
    figures = {f.name: f for f in paired(a, b)}
    success = figures["task_success"]
    # multi-tool is not paired: B's only run of it was rejected.
    assert success.tasks == len({r.task_id for r in b if r.accepted}) == len(b) - 1
    assert (success.rejected_a, success.rejected_b) == (0, 1)
    assert all(f.rejected_b == 1 for f in figures.values())


def test_bootstrap_intervals_hold_the_mean_resample_tasks_and_are_repeatable():
    clusters = [(3.0, 4), (1.0, 4), (4.0, 4), (0.0, 2)]  # (successes, runs) per task
    low, high = bootstrap(clusters)  # type: ignore[misc]
    assert low <= 8 / 14 <= high and low < high
    assert bootstrap(clusters) == (low, high)
    # One task alone: every resample is that task, so the interval is its mean.
    assert bootstrap([(3.0, 4)]) == (0.75, 0.75)
    assert bootstrap([]) is None


def test_runs_of_other_tasks_or_without_a_bundle_are_left_out_with_a_note():
    evidence = run_of("simple-generation", "openai-chat/text", B)
    evidence.inputs = []
    stranger = run_of("simple-generation", "openai-chat/text", B)
    stranger.run_id = "run_somebody_else"
    grouped, skipped = score_runs(CORPUS, [evidence, stranger], {}, PRICES)
    assert grouped == {}
    assert any("names no bundle" in s for s in skipped)
    assert any("not a run of a task" in s for s in skipped)


def test_a_declaration_is_what_the_gates_check_arguments_against():
    declaration = ToolDeclaration(name="get_weather", parameters={
        "type": "object", "properties": {"city": {"type": "integer"}}})
    failures = _gates("one-tool", run_of("one-tool", "openai-chat/tool-call", B), [declaration])
    assert [f.gate for f in failures] == ["invalid_schema"]
