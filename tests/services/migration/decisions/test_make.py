"""A decision from a bundle and its eval results (make.py, triggers.py), the eval result
reader (eval_results.py) and the Markdown file (markdown.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from modelevents.schemas import codec
from modelevents.schemas.decision_record import Demotion
from modelevents.schemas.errors import InputError
from modelevents.services.migration.bundles.bundle_file import EXAMPLE_PATH, read_bundle_file
from modelevents.services.migration.decisions import markdown
from modelevents.services.migration.decisions.eval_results import read_eval_file, summary_of
from modelevents.services.migration.decisions.make import demoted, new_decision
from modelevents.services.migration.decisions.triggers import (
    capability_difference,
    current_event_schema,
    event_schema_of,
    same_event_schema,
)
from tests.schemas.sample_records import model_event
from tests.services.migration.decisions import examples


def test_the_triggers_are_the_bundles_and_the_rates_the_results_weighted_by_runs():
    bundle = examples.bundle()
    decision = new_decision(
        bundle, [examples.result(bundle.bundle_id, "evr-1", runs=30, unknown_event_rate=0.0),
                 examples.result(bundle.bundle_id, "evr-2", runs=10, unknown_event_rate=0.4)],
        owner="platform", exceptions=["slow on long context"], evidence=["https://x.test/r"],
        require=["input.image"])
    t = decision.triggers
    assert t.model_snapshot == "gpt-4o-2024-08-06"
    assert t.event_adapters == {"openai-responses": examples.adapter_id()}
    assert t.event_schema == current_event_schema()
    assert t.tool_contracts == {"get_weather": "2"}
    assert t.capabilities is not None and json.loads(t.capabilities) == bundle.capabilities
    assert t.unknown_event_rate == pytest.approx(0.1)
    assert decision.availability.runs == 40 and decision.availability.rejected == 4
    assert decision.availability.error_rate == pytest.approx(2 / 40)
    assert decision.availability.refusal_rate == pytest.approx(4 / 40)
    assert decision.required_capabilities == ["input.image", "tools"]
    assert decision.status == "current" and decision.revision == 0
    assert decision.decision_id.startswith("dec-") and decision.bundle_id == bundle.bundle_id
    assert decision.eval_results == ["evr-1", "evr-2"]


def test_a_result_of_another_bundle_is_refused_naming_both():
    bundle = examples.bundle()
    with pytest.raises(InputError, match="evr-9 is of bundle bnd-other"):
        new_decision(bundle, [examples.result("bnd-other", "evr-9")], owner="platform")


@pytest.mark.parametrize("owner, results, message", [
    ("", True, "needs an owner"), ("platform", False, "rests on eval results")])
def test_a_decision_without_owner_or_results_is_refused(owner, results, message):
    bundle = examples.bundle()
    with pytest.raises(InputError, match=message):
        new_decision(bundle, [examples.result(bundle.bundle_id)] if results else [], owner=owner)


def test_a_demotion_is_the_next_revision_and_historical():
    bundle = examples.bundle()
    decision = new_decision(bundle, [examples.result(bundle.bundle_id)], owner="platform")
    demotion = Demotion("model_snapshot", "changed", 5, "a", "b", "run", "ev", "t", 1, 9)
    later = demoted(decision, demotion)
    assert (later.revision, later.status, later.demotion) == (1, "historical", demotion)
    assert later.decision_id == decision.decision_id and later.updated_at == 5


def test_the_event_schema_of_a_record_is_read_from_its_header():
    event = codec.encode(model_event("text.delta", seq=0))
    assert event_schema_of(event) == current_event_schema()
    assert current_event_schema().startswith("modelevents.ModelEvent@v")
    assert same_event_schema("modelevents.ModelEvent@v4", "model_event@4")
    assert not same_event_schema("modelevents.ModelEvent@v4", "modelevents.ModelEvent@v3")
    unknown = b"\xc3\x01" + bytes(8) + event[10:]
    assert event_schema_of(unknown) == "modelevents.ModelEvent@" + "00" * 8


def test_a_bundle_files_event_schema_is_the_version_events_are_written_with():
    # `bundle create` names the schema by its fingerprint; the watcher reads events' versions.
    created = read_bundle_file(EXAMPLE_PATH).event_schema
    assert same_event_schema(created, current_event_schema())
    assert same_event_schema(created, event_schema_of(codec.encode(model_event("text.delta"))))
    assert not same_event_schema(created, "modelevents.ModelEvent@v1")


def test_capabilities_compare_the_fields_both_name():
    recorded = json.dumps({"manifest_version": 1,
                           "capabilities": {"tools": True, "input": ["text", "image"]}})
    assert capability_difference(recorded, {"tools": True, "input": ["image", "text"],
                                            "reasoning": False}) is None
    expected, observed = capability_difference(recorded, {"tools": False, "input": ["text"]})
    assert json.loads(expected) == {"input": ["image", "text"], "tools": True}
    assert json.loads(observed) == {"input": ["text"], "tools": False}
    assert capability_difference(recorded, None) == (recorded, "not in the capability manifest")


def test_an_eval_result_file_is_read_and_a_bad_one_named(tmp_path: Path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"result_id": "evr-3", "bundle": "bnd-a", "runs": 12,
                                "rejected": 1, "errors": 2, "refusals": 0,
                                "unknown_event_rate": 0.25}))
    summary = read_eval_file(path)
    assert (summary.result_id, summary.bundle_id, summary.runs, summary.errors) == \
        ("evr-3", "bnd-a", 12, 2)
    assert summary.unknown_event_rate == 0.25 and summary.needs_reconciliation_rate is None
    path.write_text("{not json")
    with pytest.raises(InputError, match="result.json is not JSON"):
        read_eval_file(path)
    with pytest.raises(InputError, match="names no result_id and bundle"):
        summary_of({"runs": 3}, "x.json")


def test_a_document_with_several_bundles_yields_the_one_asked_for():
    doc = {"result_id": "evr-4", "results": [{"bundle": "bnd-a", "runs": 3},
                                             {"bundle": "bnd-b", "runs": 5}]}
    assert summary_of(doc, "doc", "bnd-b").runs == 5
    with pytest.raises(InputError, match="no result for bundle bnd-c"):
        summary_of(doc, "doc", "bnd-c")


def test_the_markdown_file_front_matter_is_the_record(tmp_path: Path):
    bundle = examples.bundle()
    decision = demoted(
        new_decision(bundle, [examples.result(bundle.bundle_id)], owner="platform",
                     evidence=["https://x.test/report"]),
        Demotion("model_snapshot", "the provider reported another model", 1796634000123,
                 "gpt-4o-2024-08-06", "gpt-4o-2024-11-20", "run_7", "ev_7", "m.events", 2, 44))
    path = tmp_path / "decision.md"
    markdown.write(decision, path)
    text = path.read_text()
    _, front, body = text.split("---\n", 2)
    assert yaml.safe_load(front) == json.loads(json.dumps(decision.as_dict()))
    assert "**Status:** historical (revision 1" in body
    assert "m.events partition 2 offset 44" in body and "https://x.test/report" in body
